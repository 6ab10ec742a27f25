package dev.streamjoin.kernel;

/** A restart from the checkpoint may help (a broker slow to answer, a task that died). */
public final class TransientKernelException extends KernelException {
    private static final long serialVersionUID = 1L;

    TransientKernelException(String message) {
        super(message, null);
    }

    TransientKernelException(String message, Throwable cause) {
        super(message, cause);
    }
}
