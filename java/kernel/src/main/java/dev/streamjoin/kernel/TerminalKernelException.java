package dev.streamjoin.kernel;

/** A person must act before the job can run again (a restart fails the same way); the message says what to do. */
public final class TerminalKernelException extends KernelException {
    private static final long serialVersionUID = 1L;

    TerminalKernelException(String message) {
        super(message, null);
    }

    TerminalKernelException(String message, Throwable cause) {
        super(message, cause);
    }
}
