"""The egress witness: the runtime's thread that answers the worker's trapped network calls.

Standard library only, Python 3.9+. It holds the listener `runner.runtime.egress.seccomp.attach`
took; every ``connect``, addressed ``sendto``, and ``sendmsg``/``sendmmsg`` of the worker or any
of its descendants waits in the kernel until this thread answers. Per call:

- The address is read from the caller's memory (``/proc/PID/mem``) and the notification is
  checked to be still valid afterwards (``SECCOMP_IOCTL_NOTIF_ID_VALID``), so a reply never goes
  to a different call that reused the slot.
- ``connect`` to an IP address (any but the gateway's loopback port), and any addressed
  ``sendto``/``sendmsg``/``sendmmsg`` to an IP address: logged (`sink`), answered
  ``ENETUNREACH``. A caller whose memory cannot be read (not dumpable, say): logged without an
  address (the runtime's log then says coverage ``partial``: `audit.record_witnessed`),
  answered ``ENETUNREACH``.
- ``connect`` to the gateway's loopback port: this thread connects a socket of its own there and
  installs it in the caller's place (``SECCOMP_IOCTL_NOTIF_ADDFD`` with ``SETFD``, the caller's
  ``O_NONBLOCK``/``O_CLOEXEC`` kept), then returns the connect's result. Nothing the caller
  rewrites after the read can make that socket go elsewhere (the kernel documents
  ``SECCOMP_USER_NOTIF_FLAG_CONTINUE`` as unsafe for such decisions). Socket options the
  caller set before ``connect`` are not carried over. A kernel without ``ADDFD`` (before 5.9):
  the connect is logged and denied, never continued.
- ``connect``/``sendto`` with a local-family address (``AF_UNIX``, ``AF_NETLINK``): continued
  (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``) only when the descriptor is, at that moment, a socket
  of that family (`procnet`), since the kernel refuses an address of another family than the
  socket's; else ``EAFNOSUPPORT``. ``connect`` with ``AF_UNSPEC``: 0, nothing done.
- ``sendmsg``/``sendmmsg``: any IP address in a header: logged, ``ENETUNREACH``. No address on
  a socket this thread swapped in for a nameserver (`dns`): never continued (the kernel would
  read the header again, and a name written into it meanwhile would send the datagram there:
  racing threads); the datagrams read are handed to the resolver by this thread and the call
  answered with what the kernel would return (`_to_resolver`). No address on a unix or
  hashed TCP socket: continued (a name written meanwhile can only be a unix one the kernel
  checks against the unix socket; TCP ignores a name, ``MSG_FASTOPEN`` is refused by the
  filter and no socket of the worker has a deferred connect: every connect is ours); else
  ``EDESTADDRREQ`` (no datagram socket has a destination: its connects were denied).
  Local-family names: as ``sendto``.
- So no decision to continue depends on the caller's memory alone: each one holds for any
  bytes the caller writes afterwards, given the socket. The residual is the socket: another
  thread that *replaces the descriptor* (``dup2``, or ``close`` and a new socket taking the
  number) between this check and the kernel's own, and writes an IP address into the call's
  memory too, can make one call the log does not name. The namespace (``network_mode=none``)
  still contains it. Closing it needs ``pidfd_getfd`` (to act on the socket itself), which
  Docker's default profile denies.

Logged attempts have the outbound log's fields (`runner.runtime.egress.audit`): ``kind``
(``connect``, ``sendto``, ``sendmsg``), ``host`` None, ``address``, ``port``, ``outcome``
``denied``, ``pid`` (the calling thread), ``event`` ``seccomp.<call>``. A syscall of a foreign
ABI (i386, x32) is not run: the caller is killed with ``SIGSYS`` and logged as kind
``foreign_abi``, outcome ``killed``, its arch and number in ``event``.
"""

import contextlib
import os
import select
import signal
import socket
import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from runner.runtime.egress import audit, dns, kernel, msghdr, procnet, seccomp, sockaddr

ENETUNREACH = 101
ENOSYS = 38
EINVAL = 22
EFAULT = 14
EAFNOSUPPORT = 97
EDESTADDRREQ = 89
MAX_ERRORS = 100  # unexpected failures remembered (each is answered ENETUNREACH anyway)
Sink = Callable[[Dict[str, Any]], None]


class Witness:
    """Serves one listener on a daemon thread until every filtered process is gone.

    Args:
        listener: the seccomp listener fd (this object closes it).
        gateway_port: the model gateway's loopback TCP port, connected through; None for none.
        sink: called (from the witness thread) with each logged attempt dict.

    Attributes:
        answered: notifications answered so far.
        errors: unexpected failures while answering (each answered ``ENETUNREACH``; the first
            `MAX_ERRORS`).
    """

    def __init__(
        self,
        listener: int,
        gateway_port: Optional[int],
        sink: Sink,
        resolver: Optional[dns.Resolver] = None,
    ) -> None:
        self.listener = listener
        self.gateway_port = gateway_port
        self.sink = sink
        self.resolver = dns.Resolver(sink) if resolver is None else resolver
        self.answered = 0
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()  # `stop` wakes the loop's untimed poll() here
        self._wake_lock = threading.Lock()  # the write end is closed under it (no fd reuse)
        self._thread = threading.Thread(target=self._run, name="egress-witness", daemon=True)

    def start(self) -> "Witness":
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop serving (trapped calls then fail with ``ENOSYS``) and close the listener."""
        self._stop.set()
        with self._wake_lock:
            if self._wake_w >= 0:  # else the loop already ended by itself
                os.write(self._wake_w, b"x")
        self._thread.join(timeout_s)

    def join(self, timeout_s: Optional[float] = None) -> None:
        """Wait until the thread ends (all filtered processes exited, or `stop`)."""
        self._thread.join(timeout_s)

    def _run(self) -> None:
        with audit.unnoted():  # our own sockets' calls (the resolver's answers) are not egress
            self._loop()

    def _loop(self) -> None:
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        resolver = self.resolver.sock
        if resolver is not None:
            poller.register(resolver, select.POLLIN)
        try:
            while not self._stop.is_set():
                events = [e for e in poller.poll() if e[0] == self.listener]
                if resolver is not None:
                    self.resolver.serve()  # non-blocking: the queries waiting, if any
                if not events:
                    continue
                if events[0][1] & select.POLLIN:
                    try:
                        raw = kernel.recv_notification(self.listener)
                    except OSError:  # the caller died or was interrupted meanwhile
                        continue
                    self._serve(raw)
                elif events[0][1] & (select.POLLHUP | select.POLLERR):
                    return  # no filtered process is left
        finally:
            with self._wake_lock:
                os.close(self._wake_w)
                self._wake_w = -1
            os.close(self._wake_r)
            os.close(self.listener)
            self.resolver.close()

    # --- one notification ----------------------------------------------------------------

    def _foreign_abi(self, notif_id: int, pid: int, nr: int, arch: int) -> int:
        """A syscall of a foreign ABI: kill the caller (``SIGSYS``), name it; ``-ENOSYS``.

        The caller waits in the kernel for this answer, so the pid is still its own while the
        notification is valid (checked first); the signal is pending before it returns.
        """
        if kernel.id_valid(self.listener, notif_id):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSYS)
        self.sink(
            {
                "kind": "foreign_abi",
                "host": None,
                "address": None,
                "port": None,
                "resolved_from": None,
                "outcome": "killed",
                "pid": pid,
                "event": "seccomp.foreign_abi:arch={:#x}:nr={}".format(arch, nr),
            }
        )
        return -ENOSYS

    def _serve(self, raw: bytes) -> None:
        notif_id, pid, _flags, nr, arch, _ip = struct.unpack_from("<QIIiIQ", raw, 0)
        args = struct.unpack_from("<6Q", raw, 32)
        machine = kernel.machine() or "x86_64"
        table = kernel.SYSCALLS[machine]
        error: Optional[int] = -ENETUNREACH
        flags = 0
        try:
            if arch != kernel.AUDIT_ARCH[machine] or (
                machine == "x86_64" and nr & kernel.X32_SYSCALL_BIT
            ):
                error = self._foreign_abi(notif_id, pid, nr, arch)
            elif nr == table["connect"]:
                error, flags = self._connect(notif_id, pid, args)
            elif nr == table["sendto"]:
                error, flags = self._sendto(notif_id, pid, args)
            elif nr == table["sendmsg"]:
                error, flags = self._sendmsg(notif_id, pid, args[0], args[1], 1, "sendmsg")
            elif nr == table["sendmmsg"]:
                error, flags = self._sendmsg(notif_id, pid, args[0], args[1], args[2], "sendmmsg")
        except Exception as exc:  # an answer is always sent: deny
            if len(self.errors) < MAX_ERRORS:
                self.errors.append("{}: {}".format(type(exc).__name__, exc)[:200])
            error, flags = -ENETUNREACH, 0
        if error is None:  # the notification went stale: nothing to answer
            return
        value, error = (error, 0) if error > 0 else (0, error)  # a result the witness made
        try:
            kernel.send_response(self.listener, notif_id, value, error, flags)
            self.answered += 1
        except OSError:  # the caller is gone (ENOENT)
            pass

    def _read(self, pid: int, address: int, size: int) -> bytes:
        return kernel.read_memory(pid, address, size)

    def _log(self, call: str, pid: int, decoded: Optional[Dict[str, Any]]) -> None:
        attempt = {
            "kind": "connect" if call == "connect" else call.replace("sendmmsg", "sendmsg"),
            "host": None,
            "address": None if decoded is None else decoded["address"],
            "port": None if decoded is None else decoded["port"],
            "resolved_from": None,
            "outcome": "denied",
            "pid": pid,
            "event": "seccomp." + call,
        }
        if decoded is not None and decoded["family"] not in ("inet", "inet6"):
            attempt["address"] = "{}:{}".format(decoded["family"], decoded["address"] or "")
        self.sink(attempt)

    def _address(
        self, notif_id: int, pid: int, pointer: int, length: int, call: str
    ) -> Tuple[Optional[int], Optional[bytes]]:
        """(error to answer now, or None; the sockaddr bytes)."""
        if length > sockaddr.MAX_SOCKADDR:
            return -EINVAL, None
        try:
            data = self._read(pid, pointer, length)
        except OSError as exc:
            if exc.errno == EFAULT:
                return -EFAULT, None
            if kernel.id_valid(self.listener, notif_id):
                self._log(call, pid, None)
            return -ENETUNREACH, None
        if not kernel.id_valid(self.listener, notif_id):
            return None, None
        return 0, data

    def _fd_flags(self, pid: int, fd: int) -> int:
        """The caller's ``fd`` open flags (``/proc/PID/fdinfo``), or -1 when unreadable."""
        try:
            with open("/proc/{}/fdinfo/{}".format(pid, fd), "rb") as handle:
                for line in handle.read(4096).split(b"\n"):
                    if line.startswith(b"flags:"):
                        return int(line.split()[1], 8)
        except (OSError, ValueError, IndexError):
            pass
        return -1

    def _gateway(
        self, notif_id: int, pid: int, fd: int, data: bytes, family: str, to_resolver: str = ""
    ) -> Optional[int]:
        """Connect a socket of ours to the gateway and put it in the caller's place (``ADDFD``).

        With ``to_resolver`` (a nameserver's address) the socket is UDP and connected to our
        `runner.runtime.egress.dns.Resolver` instead (``data`` is its address).

        Returns:
            The connect's result (0 or a negative errno), or None when the caller's descriptor
            cannot be read or replaced, a kernel without ``ADDFD`` (before 5.9) included: the
            caller then logs the connect and denies it. Never ``CONTINUE``: the kernel would
            read the address again, which another thread may have rewritten meanwhile.
        """
        flags = self._fd_flags(pid, fd)
        if flags < 0:
            return None
        kind = socket.SOCK_DGRAM if to_resolver else socket.SOCK_STREAM
        sock = socket.socket(socket.AF_INET if family == "inet" else socket.AF_INET6, kind)
        try:
            sock.setblocking(not flags & os.O_NONBLOCK)
            result = kernel.raw_connect(sock.fileno(), data)
            if to_resolver:
                self.resolver.remember(sock, to_resolver, pid)
            kernel.add_fd(self.listener, notif_id, sock.fileno(), fd, bool(flags & os.O_CLOEXEC))
        except OSError:
            return None
        finally:
            sock.close()
        return result

    def _connect(self, notif_id: int, pid: int, args: Tuple[int, ...]) -> Tuple[Optional[int], int]:
        error, data = self._address(notif_id, pid, args[1], args[2], "connect")
        if data is None:
            return error, 0
        decoded = sockaddr.decode(data)
        family = decoded["family"]
        if family == "unspec":  # "dissolve the association": every association is ours
            return 0, 0
        if family in sockaddr.LOCAL_FAMILIES:
            return self._local(pid, args[0], family)
        if (
            family in ("inet", "inet6")
            and self.gateway_port is not None
            and decoded["port"] == self.gateway_port
            and sockaddr.is_loopback(decoded["address"])
        ):
            result = self._gateway(notif_id, pid, args[0] & 0xFFFFFFFF, data, family)
            if result is not None:
                return result, 0
        elif self.resolver.sock is not None and self.resolver.is_server(decoded):
            # the lookup's transport: its queries come to our resolver, which logs their names
            target = self.resolver.address()
            fd = args[0] & 0xFFFFFFFF
            if self._gateway(notif_id, pid, fd, target, "inet", decoded["address"]) == 0:
                return 0, 0
        self._log("connect", pid, decoded)
        return -ENETUNREACH, 0

    def _local(self, pid: int, fd: int, family: str) -> Tuple[Optional[int], int]:
        """Continue a call with a ``family`` address only on a socket of that family.

        The kernel refuses an address of another family than the socket's, so rewriting the
        address after this check cannot turn the call into an IP one; only replacing the
        descriptor in that instant could (the documented residual).
        """
        if procnet.socket_kind(pid, fd & 0xFFFFFFFF) == family:
            return 0, kernel.SECCOMP_USER_NOTIF_FLAG_CONTINUE
        return -EAFNOSUPPORT, 0

    def _sendto(self, notif_id: int, pid: int, args: Tuple[int, ...]) -> Tuple[Optional[int], int]:
        error, data = self._address(notif_id, pid, args[4], args[5], "sendto")
        if data is None:
            return error, 0
        decoded = sockaddr.decode(data)
        if decoded["family"] in ("unix", "netlink"):
            return self._local(pid, args[0], decoded["family"])
        if self.resolver.is_server(decoded):  # a query to the nameserver (musl): log its name
            name = None
            with contextlib.suppress(OSError):
                name = dns.question_name(self._read(pid, args[1], min(args[2], dns.MAX_QUERY)))
            if name is not None and kernel.id_valid(self.listener, notif_id):
                self.sink(dns.lookup(name, pid, "seccomp.dns"))
                return -ENETUNREACH, 0
        self._log("sendto", pid, decoded)
        return -ENETUNREACH, 0

    def _sendmsg(
        self, notif_id: int, pid: int, fd: int, pointer: int, count: int, call: str
    ) -> Tuple[Optional[int], int]:
        size = msghdr.MSGHDR if call == "sendmsg" else msghdr.MMSGHDR
        count = min(count, msghdr.UIO_MAXIOV)
        try:
            headers = self._read(pid, pointer, size * count)
        except OSError as exc:
            if exc.errno == EFAULT:
                return -EFAULT, 0
            self._log(call, pid, None)
            return -ENETUNREACH, 0
        named: List[Dict[str, Any]] = []
        for name, namelen in msghdr.names(headers, count, size):
            if not name or not namelen:
                continue
            error, data = self._address(notif_id, pid, name, namelen, call)
            if data is None:
                return error, 0
            named.append(sockaddr.decode(data))
        if not kernel.id_valid(self.listener, notif_id):
            return None, 0
        remote = [d for d in named if d["family"] not in ("unix", "netlink")]
        if remote:
            for decoded in remote:
                self._log(call, pid, decoded)
            return -ENETUNREACH, 0
        families = {d["family"] for d in named}
        fd &= 0xFFFFFFFF
        port = self.resolver.port_of(procnet.socket_inode(pid, fd))
        if not families and port is not None:  # queries to our resolver: sent by us
            return self._to_resolver(notif_id, pid, pointer, headers, count, size, port, call)
        kind = procnet.socket_kind(pid, fd)
        if not families and kind in ("unix", "tcp"):  # TCP ignores a name (no MSG_FASTOPEN)
            return 0, kernel.SECCOMP_USER_NOTIF_FLAG_CONTINUE
        if families and families == {kind}:
            return 0, kernel.SECCOMP_USER_NOTIF_FLAG_CONTINUE
        # a datagram socket without a destination: every connect of one was denied, so the
        # kernel's answer would be EDESTADDRREQ (unless a name appears meanwhile: refused here)
        return (-EDESTADDRREQ if not families else -EAFNOSUPPORT), 0

    def _to_resolver(
        self,
        notif_id: int,
        pid: int,
        pointer: int,
        headers: bytes,
        count: int,
        size: int,
        port: int,
        call: str,
    ) -> Tuple[Optional[int], int]:
        """Perform an unnamed ``sendmsg``/``sendmmsg`` on our swapped-in resolver socket.

        Never ``CONTINUE``: the kernel would read the header again, and another thread may
        have written a name into it since (datagrams reached a denied loopback
        listener). The datagrams are read from the caller's memory once, handed to our
        resolver as if they had arrived (`runner.runtime.egress.dns.Resolver.receive`), and
        the call is answered with what the kernel would have returned: the bytes sent
        (``sendmsg``), or the messages sent with each ``msg_len`` written back
        (``sendmmsg``). Control messages and flags change nothing (nothing is sent).
        """

        def read(address: int, length: int) -> bytes:
            return self._read(pid, address, length)

        datagrams: List[Tuple[int, bytes]] = []
        failure = 0
        for index in range(count):
            try:
                datagrams.append(msghdr.datagram(read, headers, index * size, dns.MAX_QUERY))
            except OSError as exc:
                if exc.errno not in (EFAULT, msghdr.EMSGSIZE):
                    self._log(call, pid, None)  # unreadable (not dumpable): nothing is sent
                    return -ENETUNREACH, 0
                failure = -exc.errno
                break
        if not kernel.id_valid(self.listener, notif_id):
            return None, 0
        if call == "sendmmsg" and datagrams:
            lengths = [
                (pointer + index * size + msghdr.MSG_LEN_OFFSET, struct.pack("<I", length))
                for index, (length, _payload) in enumerate(datagrams)
            ]
            try:
                kernel.write_memory(pid, lengths)
            except OSError:
                return -EFAULT, 0
        for _length, payload in datagrams:
            self.resolver.receive(payload, port)
        if call == "sendmmsg":
            return (len(datagrams) or failure), 0  # as the kernel: the count, else the error
        return (datagrams[0][0] if datagrams else failure), 0


def serve(
    pid: int, channel: int, gateway_port: Optional[int], sink: Sink
) -> Tuple[Optional[Witness], Optional[Dict[str, Any]]]:
    """The runtime's whole side for worker ``pid``: bootstrap, then a started `Witness`.

    Args:
        pid: the worker (our child, running `runner.runtime.egress.seccomp.install`).
        channel: the runtime's end of the bootstrap socketpair.
        gateway_port: the model gateway's loopback port (connected through), or None.
        sink: where logged attempts go (the outbound-destination log).

    Returns:
        ``(witness, None)`` when every network call of the worker's tree is witnessed, else
        ``(None, coverage)``: the outbound log's ``coverage`` message (``partial``, why).
    """
    listener, reason = seccomp.attach(pid, channel)
    if listener is None:
        return None, {
            "type": "coverage",
            "partial": True,
            "reason": "egress witness unavailable: {}".format(reason)[:512],
        }
    return Witness(listener, gateway_port, sink).start(), None
