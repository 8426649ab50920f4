import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// Unix stream sockets: addresses, connect, listen, and moving bytes with or without
/// descriptors (SCM_RIGHTS). Every send uses MSG_NOSIGNAL: a closed peer is an error, never SIGPIPE.
extension Posix {
    /// Fills a sockaddr_un for `path` (which must fit in 107 bytes).
    ///
    /// - Throws: `SystemError` with `.nameTooLong`, naming the length, when it does not fit.
    public static func unixAddress(_ path: String) throws(SystemError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else {
            throw SystemError("socket path too long (\(bytes.count) bytes, at most \(capacity - 1)): \(path)", .nameTooLong)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// Calls `body` with `address` as the `sockaddr` pointer and length that bind and connect take.
    public static func withSockaddr<R>(_ address: inout sockaddr_un, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Calls `body` with the address of `name`: a path, or "@name" for Linux's abstract
    /// namespace (as systemd writes `NOTIFY_SOCKET`).
    public static func withUnixAddress<R>(_ name: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(SystemError) -> R {
        guard name.hasPrefix("@") else {
            var address = try unixAddress(name)
            return withSockaddr(&address, body)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        bytes[0] = 0
        guard bytes.count <= MemoryLayout.size(ofValue: address.sun_path) else {
            throw SystemError("abstract socket name too long (\(bytes.count) bytes): \(name)", .nameTooLong)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// A new close-on-exec `AF_UNIX` socket of `type` (`SOCK_STREAM`, `SOCK_DGRAM`).
    public static func unixSocket(_ type: __socket_type = SOCK_STREAM) throws(SystemError) -> Int32 {
        try check("socket") { socket(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
    }

    /// A connected pair of close-on-exec `AF_UNIX` sockets of `type`: one end for this
    /// process, the other for a child or another thread.
    public static func socketPair(_ type: __socket_type = SOCK_STREAM) throws(SystemError) -> (Int32, Int32) {
        var pair: [Int32] = [-1, -1]
        try check("socketpair") { socketpair(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) }
        return (pair[0], pair[1])
    }

    /// A blocking, close-on-exec stream socket connected to `path`.
    ///
    /// ```swift
    /// let fd = try Posix.connect(path: socketPath)   // "connect /run/x.sock: Connection refused"
    /// ```
    public static func connect(path: String) throws(SystemError) -> Int32 {
        var address = try unixAddress(path)
        let fd = try unixSocket()
        while true {
            let rc = withSockaddr(&address) { Glibc.connect(fd, $0, $1) }
            if rc == 0 { return fd }
            let code = Errno.current
            // An interrupted connect goes on by itself; asking again reports that it is done.
            if code == .interrupted || code.rawValue == EALREADY { continue }
            if code.rawValue == EISCONN { return fd }
            close(fd)
            throw SystemError("connect \(path)", code)
        }
    }

    /// A close-on-exec socket of `type` bound to `name` (a path, or "@name" for an abstract
    /// address); a stream socket also listens, with `backlog`.
    public static func bind(_ name: String, type: __socket_type = SOCK_STREAM, backlog: Int32 = 64) throws(SystemError) -> Int32 {
        let fd = try unixSocket(type)
        do throws(SystemError) {
            let rc = try withUnixAddress(name) { Glibc.bind(fd, $0, $1) }
            guard rc == 0 else { throw SystemError("bind \(name)") }
            if type == SOCK_STREAM { try check("listen \(name)") { listen(fd, backlog) } }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// The next connection on a listening socket, blocking. Close-on-exec is set after the
    /// accept (Glibc does not export accept4): a process that spawns while it accepts on
    /// another thread uses `acceptPending` (accept4) instead.
    public static func accept(_ fd: Int32) throws(SystemError) -> Int32 {
        let connection = try check("accept") { Glibc.accept(fd, nil, nil) }
        _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
        return connection
    }

    /// The next pending connection on a non-blocking listening socket, itself non-blocking
    /// and close-on-exec from the start (accept4: no other thread's spawn can inherit it).
    /// Returns nil when none is pending.
    ///
    /// - Throws: `SystemError`; ECONNABORTED when a client gave up while queued (the next may
    ///   be there), EMFILE when the descriptor table is full.
    public static func acceptPending(_ fd: Int32) throws(SystemError) -> Int32? {
        let connection = vd_accept(fd)
        if connection >= 0 { return connection }
        let code = Errno.current
        if code == .wouldBlock { return nil }
        trapIfProgrammerError(code, "accept4")
        throw SystemError("accept4", code)
    }

    /// Sends what the socket takes now. Returns the count sent; 0 when it would block (a
    /// non-blocking socket that is full). With `descriptor`, that descriptor travels with the
    /// first byte sent (SCM_RIGHTS). A blocking socket blocks until it has taken something,
    /// unless `dontWait`.
    public static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, descriptor: Int32? = nil,
                            dontWait: Bool = false) throws(SystemError) -> Int {
        if let descriptor { return try send(fd, buffer, descriptors: [descriptor]) }
        let n = try transfer("send") {
            Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL) | (dontWait ? Int32(MSG_DONTWAIT) : 0))
        }
        return n ?? 0
    }

    /// The most descriptors one send attaches (`send(_:_:descriptors:)`).
    public static let maxPassedDescriptors = Int(VD_MAX_PASSED_FDS)

    /// Sends what the socket takes now, with `descriptors` (at most `maxPassedDescriptors`,
    /// in order) attached to the first byte sent. Returns the count sent; 0 when it would block.
    public static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, descriptors: [Int32]) throws(SystemError) -> Int {
        guard !descriptors.isEmpty else { return try send(fd, buffer) }
        precondition(descriptors.count <= maxPassedDescriptors, "send: \(descriptors.count) descriptors, at most \(maxPassedDescriptors)")
        let n = try transfer("sendmsg") {
            descriptors.withUnsafeBufferPointer { vd_send_with_fds(fd, buffer.baseAddress, buffer.count, $0.baseAddress, Int32($0.count)) }
        }
        return n ?? 0
    }

    /// Sends all of `bytes`, the first with `descriptor` if given, waiting for room when the
    /// socket is non-blocking and full.
    public static func sendAll(_ fd: Int32, _ bytes: [UInt8], descriptor: Int32? = nil) throws(SystemError) {
        try sendAll(fd, bytes, descriptors: descriptor.map { [$0] } ?? [])
    }

    /// Sends all of `bytes`, the first byte with `descriptors` attached (SCM_RIGHTS; the
    /// kernel duplicates them into the receiver, the caller keeps its own), waiting for room
    /// when the socket is non-blocking and full.
    ///
    /// ```swift
    /// try Posix.sendAll(worker, frame.bytes, descriptors: [source, base])   // EPIPE: the worker is gone
    /// ```
    public static func sendAll(_ fd: Int32, _ bytes: [UInt8], descriptors: [Int32]) throws(SystemError) {
        var offset = 0
        var pending = descriptors
        while offset < bytes.count {
            let n = try bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) in
                    try send(fd, UnsafeRawBufferPointer(rebasing: raw[offset...]), descriptors: pending)
                }
            }.get()
            if n == 0 {
                // A blocking socket says EAGAIN only when its SO_SNDTIMEO expired.
                guard isNonBlocking(fd) else { throw SystemError("send", .timedOut) }
                _ = wait(fd, for: Int16(POLLOUT), timeout: nil)
                continue
            }
            pending = []
            offset += n
        }
    }

    /// Sends one datagram to `name` (a path, or "@name" for an abstract address). Returns
    /// the count sent, nil when it would block.
    public static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, to name: String) throws(SystemError) -> Int? {
        try withUnixAddress(name) { address, length in
            Result { () throws(SystemError) in
                try transfer("sendto \(name)") {
                    sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), address, length)
                }
            }
        }.get()
    }

    /// Receives what is available. Returns 0 at end of stream, nil when it would block.
    public static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try transfer("recv") { recv(fd, buffer.baseAddress, buffer.count, 0) }
    }

    /// Receives what is available and the descriptors that came with it (close-on-exec,
    /// owned by the caller), appended to `descriptors`. Returns 0 at end of stream, nil when
    /// it would block.
    public static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, descriptors: inout [Int32],
                               maxDescriptors: Int = 8) throws(SystemError) -> Int? {
        var fds = [Int32](repeating: -1, count: maxDescriptors)
        var count: Int32 = 0
        let n = try transfer("recvmsg") {
            fds.withUnsafeMutableBufferPointer { f in
                vd_recv_with_fds(fd, buffer.baseAddress, buffer.count, f.baseAddress, Int32(f.count), &count)
            }
        }
        descriptors += fds.prefix(Int(count))
        return n
    }

    /// Fills `buffer` completely, blocking. Returns false if the stream ended first.
    public static func receiveExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Bool {
        var offset = 0
        while offset < buffer.count {
            guard let n = try receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...])) else {
                guard isNonBlocking(fd) else { throw SystemError("recv", .timedOut) }
                _ = wait(fd, for: Int16(POLLIN), timeout: nil)
                continue
            }
            if n == 0 { return false }
            offset += n
        }
        return true
    }

    /// The credentials of the process at the other end of a connected Unix socket, as the
    /// kernel recorded them when that end called connect() or listen() (SO_PEERCRED).
    public static func peerCredentials(_ fd: Int32) throws(SystemError) -> (pid: pid_t, uid: uid_t, gid: gid_t) {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        try check("getsockopt SO_PEERCRED") { vd_peer_credentials(fd, &pid, &uid, &gid) }
        return (pid, uid, gid)
    }

    static func isNonBlocking(_ fd: Int32) -> Bool { fcntl(fd, F_GETFL) & O_NONBLOCK != 0 }
}
