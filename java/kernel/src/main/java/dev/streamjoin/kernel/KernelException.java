package dev.streamjoin.kernel;

/**
 * A failure the kernel knows the kind of: {@link TerminalKernelException} when a person must act before the job
 * can run again (the message says what to do), {@link TransientKernelException} when a restart from the
 * checkpoint may help. The Python driver maps a failed batch by this class (anywhere in the cause chain of the
 * Spark job's failure) to a terminal or transient job failure; any other exception counts as transient.
 */
public abstract sealed class KernelException extends RuntimeException
        permits TerminalKernelException, TransientKernelException {
    private static final long serialVersionUID = 1L;

    KernelException(String message, Throwable cause) {
        super(message, cause);
    }
}
