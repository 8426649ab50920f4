import ViewerProtocol

/// LAYOUT: one request, many files. The table keeps its id (one terminal answer: the ACK, a
/// CANCELLED or an ERROR) and the reads of the media info its files lack, shared with INFOs
/// of the same files in flight; the daemon's `LayoutRuns` opens and looks up the files.
extension RequestTable {
    /// A LAYOUT: refused when its id is in use or the connection runs `maxLayouts` already.
    mutating func layout(_ ref: RequestRef, _ request: LayoutRequest) -> [Action] {
        guard phase(of: ref) == nil else { return [.refuse(ref, Self.idInUse(ref.id))] }
        let running = (phases[ref.connection] ?? [:]).values.count { if case .layout = $0 { true } else { false } }
        guard running < limits.maxLayouts else {
            return [.answer(ref, .error(ErrorReply(.busy, "this connection runs \(limits.maxLayouts) LAYOUTs already; " +
                                                   "try again when one ends")))]
        }
        setPhase(ref, .layout)
        return [.startLayout(ref, request)]
    }

    /// Whether the LAYOUT `ref` still runs (not cancelled, failed or its connection closed).
    func isLayoutRunning(_ ref: RequestRef) -> Bool {
        if case .layout? = phase(of: ref) { return true }
        return false
    }

    /// One item of LAYOUT `ref` found no media info stored: it joins a read of the file's
    /// header in flight, or starts one (`layoutInfo` follows, once).
    mutating func layoutInfoNeeded(_ ref: RequestRef, index: UInt32, source: Kinds.Source, key: Key) -> [Action] {
        guard isLayoutRunning(ref) else { return [] }
        return joinInfoJob(key, source: source) { $0.layoutWaiters.append(LayoutWaiter(ref: ref, index: index)) }.1
    }

    /// One item of LAYOUT `ref` has stored info but no placeholder: it waits for a render
    /// of the whole picture (`key`; the worker makes the placeholder from its output), joining
    /// one in flight or starting one made by `makeJob`, at background priority, no request
    /// behind it (`layoutPlaceholder` follows, once, however the render ends).
    mutating func layoutPlaceholderNeeded(_ ref: RequestRef, index: UInt32, key: Key, makeJob: (JobID) -> Kinds.Job) -> [Action] {
        guard isLayoutRunning(ref), !shuttingDown else { return [.layoutPlaceholder(ref, index: index)] }
        return lift(renders.placeholder(key, for: LayoutItemRef(layout: ref, index: index), makeJob: makeJob))
    }

    /// The LAYOUT has sent its last item (the daemon sends its ACK), or failed as a whole.
    mutating func layoutEnded(_ ref: RequestRef) {
        guard isLayoutRunning(ref) else { return }
        forgetLayoutWaiters { $0.ref == ref }
        setPhase(ref, nil)
    }

    /// Removes LAYOUT items from the info jobs they wait for (their answers reach nobody).
    mutating func forgetLayoutWaiters(_ matching: (LayoutWaiter) -> Bool) {
        for key in infoJobs.keys where !(infoJobs[key]?.layoutWaiters.isEmpty ?? true) {
            infoJobs[key]!.layoutWaiters.removeAll(where: matching)
        }
    }
}
