import ViewerProtocol

/// A RESULT whose bytes are the request's path, so a test can tell whose answer it is.
func resultEchoing(_ received: Received, fromCache: Bool = false) -> Message {
    guard case .render(let request) = received.message else { return .error(ErrorReply(.invalidArgument, "not a RENDER")) }
    return .result(RenderResult(format: request.spec.format, width: request.spec.width, height: request.spec.height,
                                fromCache: fromCache, bytes: Array(request.path.utf8)))
}

extension Received {
    /// The RENDER this frame carries; fails the test's expectation otherwise.
    var render: RenderRequest? {
        if case .render(let request) = message { return request }
        return nil
    }
}
