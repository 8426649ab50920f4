import ViewerProtocol

/// The rules a frame from a client meets before the daemon acts on it, as a pure function:
/// the handshake (HELLO first and once, in a version both ends speak), descriptors (a frame
/// flagged with one must bring it; only RENDER and INFO take one), bodies that do not decode,
/// and messages only servers send.
enum FrameIntake {
    enum Verdict {
        /// Answer this connection-level ERROR (request id 0), then close.
        case reject(ErrorReply)
        /// Answer this ERROR on the frame's id. A CANCEL or SET_PRIORITY carries the id of the
        /// request it names: the ERROR ends that request too (`endsRequest`: one terminal
        /// answer per id).
        case refuse(ErrorReply, endsRequest: Bool)
        /// The handshake: the connection speaks `version` from now on.
        case greet(version: UInt16, clientName: String)
        /// A request for the daemon.
        case message(Message)
    }

    /// - Parameters:
    ///   - greeted: whether the connection's HELLO was answered.
    ///   - descriptor: nil for a frame not flagged with a descriptor; else whether one arrived.
    static func classify(_ frame: Frame, greeted: Bool, descriptor: Bool?) -> Verdict {
        if descriptor == false {
            return .reject(ErrorReply(.malformedFrame, "frame \(frame.requestID) is flagged with a descriptor but none arrived"))
        }
        let isControl = frame.type == MessageType.cancel.rawValue || frame.type == MessageType.setPriority.rawValue
        let message: Message
        do throws(ProtocolError) {
            message = try Message(frame: frame)
        } catch {
            if !greeted { return .reject(ErrorReply(.handshakeRequired, "the first frame must be HELLO (\(error))")) }
            if isControl { return .refuse(ErrorReply(.malformedFrame, "\(error)"), endsRequest: true) }
            if case .unexpectedMessage = error { return .refuse(ErrorReply(.unknownMessage, "\(error)"), endsRequest: false) }
            return .refuse(ErrorReply(.malformedFrame, "\(error)"), endsRequest: false)
        }
        guard greeted else {
            guard case .hello(let hello) = message else {
                return .reject(ErrorReply(.handshakeRequired, "the first frame must be HELLO, not \(message.type)"))
            }
            let lower = max(hello.minVersion, ProtocolVersion.supported.lowerBound)
            let upper = min(hello.maxVersion, ProtocolVersion.supported.upperBound)
            guard lower <= upper else {
                return .reject(ErrorReply(.unsupportedVersion,
                                          "client speaks \(hello.minVersion)-\(hello.maxVersion), server speaks " +
                                          "\(ProtocolVersion.supported.lowerBound)-\(ProtocolVersion.supported.upperBound)"))
            }
            return .greet(version: upper, clientName: String(hello.clientName.prefix(64)))
        }
        if descriptor == true && message.type != .render && message.type != .info {
            return .refuse(ErrorReply(.invalidArgument, "only RENDER and INFO take a descriptor"), endsRequest: isControl)
        }
        switch message {
        case .hello:
            return .refuse(ErrorReply(.invalidArgument, "HELLO was already received"), endsRequest: false)
        case .welcome, .result, .preview, .error, .cancelled, .statsReply, .pong, .ack, .infoReply, .layoutItems:
            return .refuse(ErrorReply(.unknownMessage, "\(message.type) is sent by servers, not clients"), endsRequest: false)
        default:
            return .message(message)
        }
    }

    /// The WELCOME of a connection that speaks `version`: what this daemon offers.
    static func welcome(version: UInt16, configuration: Configuration) -> Welcome {
        Welcome(version: version, serverVersion: viewerdVersion, maxRequestBody: configuration.maxRequestBody,
                maxResponseBody: configuration.maxResponseBody,
                capabilities: [.descriptorPassing, .previews, .prefetch, .invalidate, .cancellation, .mediaInfo, .zoom,
                               .layout, .sharedMemory, .transforms],
                maxOutstanding: UInt32(configuration.maxOutstandingPerClient))
    }
}
