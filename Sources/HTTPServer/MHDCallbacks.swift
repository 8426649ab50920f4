import CMicroHTTPD
import CMicroHTTPDShim
import HTTPMessage
import ViewerLog

/// MHD's callbacks, as C function pointers. Each gets the `ServerCore` as its context (not
/// retained: the core outlives its daemons); a connection's `Connection` lives in MHD's socket
/// context (retained from STARTED to CLOSED) and a request's `HTTPReply` in its request
/// context (retained from the access handler's first call to the completion).
enum MHDCallbacks {
    static func serverCore(_ context: UnsafeMutableRawPointer) -> ServerCore {
        Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue()
    }

    static func connectionRecord(_ connection: OpaquePointer) -> Connection? {
        vd_mhd_socket_context(connection).map { Unmanaged<Connection>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Before MHD accepts: the limit over every socket (MHD's own is per daemon, split among its threads).
    /// Refuses a connection while stopping, past the connections over all sockets, and past
    /// those from the peer's address block (an IPv6 /64: MHD's own per-address limit counts
    /// whole addresses, of which one IPv6 host has 2^64).
    static let acceptPolicy: MHD_AcceptPolicyCallback = { context, address, _ in
        guard let context else { return .NO }
        let core = MHDCallbacks.serverCore(context)
        guard !core.isStopping, core.connections.count < core.limits.connections else { return .NO }
        guard let address, let peer = Endpoint.describe(address, withPort: false) else { return .YES }
        return core.connections.connections(from: AddressBlock.of(peer)) < core.limits.connectionsPerAddress ? .YES : .NO
    }

    static let connectionChanged: MHD_NotifyConnectionCallback = { context, connection, socketContext, code in
        guard let context, let connection, let socketContext else { return }
        let table = MHDCallbacks.serverCore(context).connections
        if code == .CONNECTION_NOTIFY_STARTED {
            let peer = vd_mhd_client_address(connection).flatMap { Endpoint.describe($0, withPort: false) } ?? "unknown"
            let record = Connection(fd: vd_mhd_connection_fd(connection), peer: peer)
            socketContext.pointee = Unmanaged.passRetained(record).toOpaque()
            table.opened(record)
        } else if let pointer = socketContext.pointee {
            socketContext.pointee = nil
            table.closed(Unmanaged<Connection>.fromOpaque(pointer).takeRetainedValue())
        }
    }

    /// The request line's target as sent, before MHD unescapes and splits its copy.
    static let requestLine: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
        context, uri, connection in
        if let context, let uri, let connection, let record = MHDCallbacks.connectionRecord(connection) {
            MHDCallbacks.serverCore(context).connections.setTarget(record, String(cString: uri))
        }
        return nil
    }

    /// Called with the headers (first), then once the request is read whole (second: the
    /// request goes to the handler), then after each resume. A response is queued at the first
    /// call only to refuse a body: MHD then closes the connection instead of reading it.
    static let access: MHD_AccessHandlerCallback = { context, connection, url, method, _, _, uploadSize, requestContext in
        guard let context, let connection, let requestContext else { return .NO }
        let core = MHDCallbacks.serverCore(context)
        guard let existing = requestContext.pointee else {
            guard let record = MHDCallbacks.connectionRecord(connection) else { return .NO }
            let target = core.connections.target(of: record) ?? url.map { String(cString: $0) } ?? "/"
            let request = HTTPRequest(method: method.map { String(cString: $0) } ?? "", target: target,
                                      headers: headers(connection), peer: record.peer)
            let reply = HTTPReply(request: request, core: core, connection: connection)
            requestContext.pointee = Unmanaged.passRetained(reply).toOpaque()
            core.unfinished.withLock { $0 += 1 }
            core.connections.handling(record, reply)
            guard Admission.hasBody(request) else { return .YES }
            _ = reply.begin()
            reply.send(Admission.tooLarge())
            return core.queue(reply.afterHandler()!, for: reply, on: connection)
        }
        let reply = Unmanaged<HTTPReply>.fromOpaque(existing).takeUnretainedValue()
        if let uploadSize, uploadSize.pointee > 0 {
            // A body's bytes after the 413 was queued: dropped.
            uploadSize.pointee = 0
            return .YES
        }
        guard reply.begin() else {
            guard let response = reply.afterResume() else { return .NO }
            return core.queue(response, for: reply, on: connection)
        }
        let request = reply.request
        if let answer = Admission.headLimit(request, limit: core.limits.headerBytes) ?? Admission.answer(to: request) {
            reply.send(answer)
        } else if core.isStopping {
            reply.send(Admission.stopping())
        } else if !core.admit(request.peer) {
            reply.send(Admission.busy(limit: core.limits.requestsInFlightPerAddress))
        } else {
            reply.countInFlight()
            core.handler(request, reply)
        }
        guard let response = reply.afterHandler() else {
            core.connections.suspended()
            return .YES
        }
        return core.queue(response, for: reply, on: connection)
    }

    static let requestCompleted: MHD_RequestCompletedCallback = { context, connection, requestContext, termination in
        guard let context, let requestContext, let pointer = requestContext.pointee else { return }
        requestContext.pointee = nil
        let core = MHDCallbacks.serverCore(context)
        let reply = Unmanaged<HTTPReply>.fromOpaque(pointer).takeRetainedValue()
        core.unfinished.withLock { $0 -= 1 }
        let completion = reply.finish(completed: termination == .REQUEST_TERMINATED_COMPLETED_OK)
        if let connection, let record = MHDCallbacks.connectionRecord(connection) { core.connections.reading(record) }
        core.completed?(completion)
    }

    static let log: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void = { _, message in
        guard let message else { return }
        var text = String(cString: message)
        while text.last == "\n" { text.removeLast() }
        Log.debug("event=http-library message=\(Log.quote(text))")
    }

    /// The request's header fields in the order sent.
    static func headers(_ connection: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        withUnsafeMutablePointer(to: &headers) { pointer in
            _ = MHD_get_connection_values(connection, .HEADER_KIND, { cls, _, key, value in
                guard let cls, let key else { return .YES }
                cls.assumingMemoryBound(to: HTTPHeaders.self).pointee.append(String(cString: key), value.map { String(cString: $0) } ?? "")
                return .YES
            }, pointer)
        }
        return headers
    }
}

extension ServerCore {
    /// The fields MHD writes itself from the response (a second copy would contradict it).
    static let transportFields: Set<String> = ["content-length", "transfer-encoding", "date"]

    /// Queues `response` on `connection` (from MHD's access handler only).
    func queue(_ response: HTTPResponse, for reply: HTTPReply, on connection: OpaquePointer) -> MHD_Result {
        let created = response.body.withUnsafeBytes { body in
            MHD_create_response_from_buffer(body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let created else { return .NO }
        defer { MHD_destroy_response(created) }
        for (name, value) in response.headers where !Self.transportFields.contains(name.lowercased()) {
            if MHD_add_response_header(created, name, value) == .NO {
                Log.warning("event=http-header-refused name=\(Log.quote(name)) status=\(response.status)")
            }
        }
        reply.queued(status: response.status, bytes: reply.request.method == "HEAD" ? 0 : response.body.count)
        if let record = MHDCallbacks.connectionRecord(connection) { connections.writing(record) }
        return MHD_queue_response(connection, UInt32(clamping: response.status), created)
    }
}
