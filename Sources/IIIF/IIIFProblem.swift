import HTTPMessage

/// Why a request is refused: the status and the short reason its text body says.
public struct IIIFProblem: Error, Sendable, Equatable {
    public let status: Int
    public let reason: String

    public init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    static func badRequest(_ reason: String) -> IIIFProblem { IIIFProblem(400, reason) }

    /// The one 404 of every identifier that names nothing the front serves: outside a root,
    /// missing, a directory, an unknown root. The same bytes whatever is or is not there.
    static let notFound = IIIFProblem(404, "not found: no image has this identifier")
}
