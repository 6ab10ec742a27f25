"""Whether a failure in Spark's JVM can be cured by a restart, decided by its Java class.

A Python call into the JVM fails with py4j's ``Py4JJavaError`` (``java_exception``) or PySpark's conversion of
it (``_origin``); a failed task reaches the driver as a ``SparkException`` whose cause chain holds the task's
exception, and whose message names it (``... most recent failure: Lost task ...: <class>: <message>``) even when
the exception itself could not be sent back. :func:`jvm_error` looks through both:

* a ``dev.streamjoin.kernel.TerminalKernelException`` anywhere: terminal (its message says what to do);
* a JVM missing the kernel's classes (``ClassNotFoundException``/``NoClassDefFoundError`` of
  ``dev.streamjoin.kernel``), or Kafka refusing the connection's credentials or permissions: terminal;
* anything else, ``TransientKernelException`` included: transient, as every unknown failure is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from streamjoin.core.errors import JvmError
from streamjoin.core.plans import KERNEL_JAR

KERNEL = "dev.streamjoin.kernel."
TERMINAL_KERNEL = KERNEL + "TerminalKernelException"
TRANSIENT_KERNEL = KERNEL + "TransientKernelException"
_MISSING_CLASS = ("java.lang.ClassNotFoundException", "java.lang.NoClassDefFoundError")
#: Java classes (a class or one of its superclasses) a restart cannot cure, and what to do instead
TERMINAL_CLASSES = {
    "org.apache.kafka.common.errors.AuthenticationException": "check the Kafka connection's credentials",
    "org.apache.kafka.common.errors.AuthorizationException": "grant the Kafka connection's user the access named",
}
#: ``<class>: <message>`` of a kernel exception, or a missing kernel class, as Spark's task failure prints it
_NAMED = re.compile(
    r"(dev\.streamjoin\.kernel\.(?:Terminal|Transient)KernelException): ([^\n]*)"
    r"|(java\.lang\.(?:ClassNotFoundException|NoClassDefFoundError)): (dev[./]streamjoin[./]kernel[./][\w$./]*)"
)
_MAX_DEPTH = 16


class _Throwable:
    """What the classification needs of one Java throwable: its class names (own first, then superclasses) and
    its message."""

    def __init__(self, java: Any, root: bool) -> None:
        names: list[str] = []
        cls = java.getClass()
        while cls is not None and len(names) < _MAX_DEPTH:
            names.append(str(cls.getName()))
            cls = cls.getSuperclass()
        self.names, self.message, self.root = names, str(java.getMessage() or ""), root

    @property
    def name(self) -> str:
        return self.names[0]


def jvm_error(exc: BaseException) -> JvmError | None:
    """``exc`` as a :class:`JvmError` whose ``transient`` says whether a restart can help; None when no Java
    exception is behind it (or the JVM cannot be asked any more: then nothing is known)."""
    tops = list(_java_exceptions(exc))
    if not tops:
        return None
    try:
        chain = [t for top in tops for t in _chain(top)]
    except Exception:  # the JVM is gone (py4j cannot reach it): nothing more is known
        return None
    return _classify(chain)


def _classify(chain: list[_Throwable]) -> JvmError:
    for t in chain:
        if TERMINAL_KERNEL in t.names:
            return JvmError(t.name, t.message, transient=False)
    for t in chain:
        if t.name in _MISSING_CLASS and t.message.replace("/", ".").startswith(KERNEL):
            return _kernel_missing(t.name, t.message)
        action = next((TERMINAL_CLASSES[n] for n in t.names if n in TERMINAL_CLASSES), None)
        if action is not None:
            return JvmError(t.name, t.message, transient=False, action=action)
    for t in chain:  # a task's exception Spark could only describe: its class and message in the text
        for match in _NAMED.finditer(t.message):
            kernel, message, missing, name = match.groups()
            if kernel == TERMINAL_KERNEL:
                return JvmError(kernel, message, transient=False)
            if missing is not None:
                return _kernel_missing(missing, name)
    # not known to be permanent: the kernel's transient exception, else the first exception's root cause
    # (a failed job's SparkException carries the whole task stack; its root names what went wrong)
    deciding = next((t for t in chain if TRANSIENT_KERNEL in t.names), None)
    if deciding is None:
        deciding = next((t for t in chain if t.root), chain[-1])
    return JvmError(deciding.name, deciding.message, transient=True)


def _kernel_missing(name: str, missing: str) -> JvmError:
    return JvmError(name, missing, transient=False, action=(
        f"the engine kernel's classes are not on the classpath of Spark's driver or executors: run `make setup` to "
        f"build {KERNEL_JAR}, then start the job with it in spark.jars"
    ))  # fmt: skip


def _java_exceptions(exc: BaseException) -> Iterator[Any]:
    """The Java exceptions behind ``exc`` and the Python exceptions it was raised from or during."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen or len(seen) >= _MAX_DEPTH:
            continue
        seen.add(id(current))
        java = getattr(current, "java_exception", None) or getattr(current, "_origin", None)
        if java is not None:
            yield java
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]


def _chain(java: Any) -> Iterator[_Throwable]:
    """``java`` and its causes, the last marked as the root."""
    for _ in range(_MAX_DEPTH):
        cause = java.getCause()
        yield _Throwable(java, root=cause is None)
        if cause is None:
            return
        java = cause
