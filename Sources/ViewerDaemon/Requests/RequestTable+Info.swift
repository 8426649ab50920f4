import ViewerProtocol

/// INFO: its file is opened off the loop with RENDER's access rules; its media info comes
/// from the store when the store has it, else from one read of the file's header in a
/// worker, shared by every identical INFO in flight.
extension RequestTable {
    /// An INFO.
    mutating func info(_ ref: RequestRef, _ request: InfoRequest) -> [Action] {
        counters.infoRequests += 1
        guard phase(of: ref) == nil else { return [.refuse(ref, Self.idInUse(ref.id))] }
        setPhase(ref, .openingInfo)
        return [.openInfo(ref, request)]
    }

    /// An INFO's file is open (or why not); `key`: where the store keeps its media info.
    mutating func infoOpened(_ ref: RequestRef, _ result: Result<(Kinds.Source, key: Key), ErrorReply>) -> [Action] {
        guard case .openingInfo? = phase(of: ref) else { return [] }
        switch result {
        case .failure(let error):
            setPhase(ref, nil)
            return [.answer(ref, .error(error))]
        case .success(let (source, key)):
            setPhase(ref, .lookingUpInfo(source, key))
            return [.lookUpInfo(ref, source, key)]
        }
    }

    /// What the store said for an INFO (`Action.lookUpInfo`). A file that failed before fails
    /// again without a read, as a RENDER of it would; except after a render too large or too
    /// slow for its pixels: its header reads fine.
    mutating func infoLookedUp(_ ref: RequestRef, _ verdict: StoreVerdict) -> [Action] {
        guard case .lookingUpInfo(let source, let key)? = phase(of: ref) else { return [] }
        if case .hit = verdict {
            setPhase(ref, nil)
            return [.servedFromStore(ref)]
        }
        if case .miss(let failure?, _, _) = verdict, failure.code != .tooLarge && failure.code != .timeout {
            setPhase(ref, nil)
            counters.negativeHits += 1
            return [.answer(ref, .error(failure))]
        }
        let (id, actions) = joinInfoJob(key, source: source) { $0.waiters.append(ref) }
        setPhase(ref, .waitingInfo(id))
        return actions
    }

    /// Joins the info job of `key` (`join` adds the waiter), or starts one.
    mutating func joinInfoJob(_ key: Key, source: Kinds.Source, _ join: (inout InfoEntry) -> Void) -> (JobID, [Action]) {
        if infoJobs[key] != nil {
            join(&infoJobs[key]!)
            counters.infoCoalesced += 1
            return (infoJobs[key]!.id, [])
        }
        let id = JobID.info(nextInfoJob)
        nextInfoJob += 1
        var entry = InfoEntry(id: id, waiters: [])
        join(&entry)
        infoJobs[key] = entry
        infoKeys[id] = key
        counters.infoReads += 1
        return (id, [.readInfo(id, source, key)])
    }

    /// An info job ended: every INFO still waiting for it gets its media info or the error.
    mutating func infoRead(_ id: JobID, _ result: Result<Kinds.Info, ErrorReply>) -> [Action] {
        guard let key = infoKeys.removeValue(forKey: id), let entry = infoJobs.removeValue(forKey: key) else { return [] }
        return entry.waiters.map { ref -> Action in
            setPhase(ref, nil)
            switch result {
            case .success(let info): return .answerInfo(ref, info)
            case .failure(let error): return .answer(ref, .error(error))
            }
        } + entry.layoutWaiters.compactMap { waiter in
            guard case .layout? = phase(of: waiter.ref) else { return nil }
            return .layoutInfo(waiter.ref, index: waiter.index, key: key, result)
        }
    }
}
