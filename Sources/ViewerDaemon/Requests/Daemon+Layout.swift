import Rendering
import RenditionStore
import ViewerProtocol

/// A LAYOUT on the loop: its files are scanned off the loop (`LayoutWork`), each chunk sent
/// as one LAYOUT_ITEMS frame as it comes; the files whose info is not stored are then read,
/// lowest index first, at most `LayoutWork.maxReading` at once, through the request table's
/// info jobs (shared with INFOs of the same files); the ACK ends it when every item is final.
///
/// Confined to the event loop thread.
final class LayoutRun {
    let work: LayoutWork
    /// Chunks not scanned yet.
    var chunksLeft: Int
    /// Positions of files waiting for a read of their info, in no order (the lowest goes first).
    var misses: [Int] = []
    /// Files being opened or read now.
    var reading = 0

    init(work: LayoutWork, chunks: Int) {
        (self.work, chunksLeft) = (work, chunks)
    }

    var isDone: Bool { chunksLeft == 0 && misses.isEmpty && reading == 0 }
}

extension Daemon {
    /// Starts a LAYOUT the request table accepted: lists its folder off the loop, or scans
    /// its paths.
    func startLayout(_ ref: RequestRef, _ request: LayoutRequest) {
        guard let connection = connections.byID[ref.connection] else { return }
        switch request.source {
        case .paths(let paths):
            guard paths.count <= Int(LayoutRequest.maxItems) else {
                return failLayout(ref, ErrorReply(.invalidArgument, "a LAYOUT names at most \(LayoutRequest.maxItems) paths, not \(paths.count)"))
            }
            begin(ref, paths: Array(paths.prefix(Self.window(request))), firstIndex: 0, named: false,
                  total: UInt32(paths.count), peer: connection.peerUID)
        case .folder(let folder, let order):
            let access = opener.access, peer = connection.peerUID, completions = completions
            opener.io.run(urgent: true) {
                let listed = Result { () throws(RenderError) in try access.listFolder(folder, order: order, peerUID: peer) }
                completions.post(.layout(.listed(ref, listed, request)))
            }
        }
    }

    /// Items a LAYOUT answers at most: its `limit`, within the daemon's.
    private static func window(_ request: LayoutRequest) -> Int {
        Int(request.limit == 0 ? LayoutRequest.maxItems : min(request.limit, LayoutRequest.maxItems))
    }

    private func begin(_ ref: RequestRef, paths: [String], firstIndex: UInt32, named: Bool, total: UInt32, peer: UInt32) {
        let work = LayoutWork(ref: ref, paths: paths, firstIndex: firstIndex, named: named, total: total, peer: peer,
                              access: opener.access, store: store)
        let chunks = work.chunks
        let run = LayoutRun(work: work, chunks: chunks.count)
        layouts[ref] = run
        let completions = completions
        for range in chunks {
            opener.io.run(urgent: true) { completions.post(.layout(.scanned(work, work.scan(range)))) }
        }
        finishIfDone(run)
    }

    /// Acts on what the I/O threads found for a LAYOUT.
    func handle(_ event: LayoutEvent) {
        switch event {
        case .listed(let ref, let result, let request):
            guard requests.isLayoutRunning(ref), let connection = connections.byID[ref.connection] else { return }
            switch result {
            case .failure(let error):
                failLayout(ref, ErrorReply(error.code, error.description))
            case .success(let files):
                let start = min(Int(request.offset), files.count)
                let window = files[start..<min(start + Self.window(request), files.count)]
                begin(ref, paths: Array(window), firstIndex: UInt32(start), named: true, total: UInt32(files.count),
                      peer: connection.peerUID)
            }
        case .scanned(let work, let chunk):
            guard let run = running(work) else { return }
            run.chunksLeft -= 1
            send(chunk.packed, of: run)
            run.misses += chunk.misses
            readMisses(run)
            finishIfDone(run)
        case .opened(let work, let position, let result):
            guard let run = running(work) else { return }
            switch result {
            case .failure(let error):
                answer(position, of: run, error: ErrorReply(error.code, error.description))
            case .success(let source):
                let key = MediaInfoRecord.key(for: source)
                // Read meanwhile (an INFO, a RENDER of the file)? Else its read starts, or joins one.
                var packed: [UInt8] = []
                let hit = requestStore.reader.withRendition(key) { _, bytes -> Bool in
                    guard let body = MediaInfoRecord.body(bytes) else { return false }
                    LayoutItem.pack(index: work.index(of: position), path: work.named ? work.paths[position] : nil,
                                    infoBody: body, error: nil, infoPending: false, placeholderPending: false, into: &packed)
                    return true
                } ?? false
                if hit {
                    run.reading -= 1
                    send(packed, of: run)
                } else if let failure = LayoutWork.answeredFailure(store.failure(source: source.identity.bytes)) {
                    answer(position, of: run, error: failure)
                } else {
                    perform(requests.layoutInfoNeeded(work.ref, index: work.index(of: position), source: source, key: key))
                    return
                }
            }
            readMisses(run)
            finishIfDone(run)
        }
    }

    /// An info job ended for one LAYOUT item (`Requests.Action.layoutInfo`).
    func layoutInfoRead(_ ref: RequestRef, index: UInt32, _ result: Result<MediaInfo, ErrorReply>) {
        guard let run = layouts[ref], requests.isLayoutRunning(ref) else { return }
        let position = Int(index - run.work.firstIndex)
        switch result {
        case .success(let info):
            var packed: [UInt8] = []
            LayoutItem(index: index, path: run.work.named ? run.work.paths[position] : nil, outcome: .info(info)).packed(into: &packed)
            run.reading -= 1
            send(packed, of: run)
        case .failure(let error):
            answer(position, of: run, error: error)
        }
        readMisses(run)
        finishIfDone(run)
    }

    /// Stops the runs whose LAYOUT the request table no longer has (cancelled, failed, its
    /// connection closed): their I/O work ends at the next file.
    func stopEndedLayouts(on connection: UInt64? = nil) {
        for (ref, run) in layouts where (connection == nil || ref.connection == connection) && !requests.isLayoutRunning(ref) {
            run.work.stopped.store(true, ordering: .relaxed)
            layouts[ref] = nil
        }
    }

    /// The run of `work` if its LAYOUT still runs; else it is stopped.
    private func running(_ work: LayoutWork) -> LayoutRun? {
        guard let run = layouts[work.ref], run.work === work else { return nil }
        guard requests.isLayoutRunning(work.ref), connections.byID[work.ref.connection] != nil else {
            work.stopped.store(true, ordering: .relaxed)
            layouts[work.ref] = nil
            return nil
        }
        return run
    }

    /// Opens the next files whose info is missing, lowest index first, within the run's
    /// and the user's limits of files open.
    private func readMisses(_ run: LayoutRun) {
        guard let connection = connections.byID[run.work.ref.connection] else { return }
        let work = run.work, completions = completions
        while run.reading < LayoutWork.maxReading, let lowest = run.misses.indices.min(by: { run.misses[$0] < run.misses[$1] }) {
            guard let lease = claimSource(for: connection) else {
                // The user's sources are all held; the reads in flight pump again when they end.
                guard run.reading == 0 else { return }
                let error = ErrorReply(.busy, sourceQuotaMessage)
                let waiting = run.misses
                run.misses = []
                var packed: [UInt8] = []
                for position in waiting { work.pack(position, error: error, into: &packed) }
                return send(packed, of: run)
            }
            let position = run.misses.remove(at: lowest)
            run.reading += 1
            opener.io.run(urgent: true) {
                let opened = Result { () throws(RenderError) in
                    try work.access.open(path: work.paths[position], descriptor: nil, peerUID: work.peer, lease: lease)
                }
                completions.post(.layout(.opened(work, position: position, opened)))
            }
        }
    }

    /// Sends one item's error, and counts its read done.
    private func answer(_ position: Int, of run: LayoutRun, error: ErrorReply) {
        var packed: [UInt8] = []
        run.work.pack(position, error: error, into: &packed)
        run.reading -= 1
        send(packed, of: run)
    }

    /// One LAYOUT_ITEMS frame of packed items.
    private func send(_ packed: [UInt8], of run: LayoutRun) {
        guard !packed.isEmpty, let connection = connections.byID[run.work.ref.connection] else { return }
        LayoutItems.body(total: run.work.total, packedItems: packed).withUnsafeBytes {
            connection.enqueue(.layoutItems, requestID: run.work.ref.id, body: $0)
        }
        answers.connections.touch(connection)
    }

    /// Every item final: the ACK, with the count of files answered.
    private func finishIfDone(_ run: LayoutRun) {
        guard run.isDone else { return }
        let ref = run.work.ref
        layouts[ref] = nil
        requests.layoutEnded(ref)
        if let connection = connections.byID[ref.connection] {
            send(connection, .ack(count: UInt64(run.work.paths.count)), requestID: ref.id)
        }
    }

    /// The LAYOUT fails as a whole: its ERROR is its terminal answer.
    private func failLayout(_ ref: RequestRef, _ error: ErrorReply) {
        requests.layoutEnded(ref)
        if let connection = connections.byID[ref.connection] { send(connection, .error(error), requestID: ref.id) }
    }
}
