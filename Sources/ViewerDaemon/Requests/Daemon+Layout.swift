import Rendering
import RenditionStore
import ViewerProtocol

/// A LAYOUT on the loop: its files are scanned off the loop (`LayoutWork`), each chunk sent
/// as one LAYOUT_ITEMS frame as it comes; the files whose info is not stored are then read,
/// lowest index first, at most `LayoutWork.maxReading` at once, through the request table's
/// info jobs (shared with INFOs of the same files). Files whose info has no placeholder are
/// sent `placeholder_pending` and rendered small at background priority (`LayoutWork.placeholderSpec`:
/// the worker makes the placeholder from the output), at most `LayoutWork.maxPlaceholderRenders`
/// a connection, its newest LAYOUT's first, lowest index first; each is sent again when its render
/// ends. The ACK ends it when every item is final.
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
    /// The LAYOUT's place among the daemon's, for newest first: a later LAYOUT's placeholders
    /// are rendered before an earlier one's.
    let sequence: UInt64
    /// Items waiting for their placeholder's render to be queued, highest position first
    /// (the lowest is taken from the end).
    var placeholdersWanted: [LayoutWork.PendingPlaceholder] = []
    /// Items whose placeholder's render is queued or running, by index.
    var placeholdersRendering: [UInt32: LayoutWork.PendingPlaceholder] = [:]
    /// Placeholder files being opened, or their renders queued or running.
    var placeholdersInFlight = 0

    init(work: LayoutWork, chunks: Int, sequence: UInt64) {
        (self.work, chunksLeft, self.sequence) = (work, chunks, sequence)
    }

    var isDone: Bool {
        chunksLeft == 0 && misses.isEmpty && reading == 0 && placeholdersWanted.isEmpty && placeholdersInFlight == 0
    }

    /// More items wait for a placeholder.
    func want(_ placeholders: [LayoutWork.PendingPlaceholder]) {
        guard !placeholders.isEmpty else { return }
        placeholdersWanted += placeholders
        placeholdersWanted.sort { $0.position > $1.position }
    }
}

extension Daemon {
    /// Starts a LAYOUT the request table accepted: lists its folder off the loop, or scans
    /// its paths.
    func startLayout(_ ref: RequestRef, _ request: LayoutRequest) {
        // A listing still on the I/O threads is of an earlier LAYOUT with this id: it ended.
        layoutListings[ref] = nil
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
            layoutSequence += 1
            let listing = layoutSequence
            layoutListings[ref] = listing
            let offset = Int(request.offset), limit = Self.window(request)
            opener.io.run(urgent: true) {
                let listed = Result { () throws(RenderError) in
                    try access.listFolder(folder, order: order, peerUID: peer, offset: offset, limit: limit)
                }
                completions.post(.layout(.listed(ref, listing: listing, listed)))
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
        layoutSequence += 1
        let run = LayoutRun(work: work, chunks: chunks.count, sequence: layoutSequence)
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
        case .listed(let ref, let listing, let result):
            guard layoutListings[ref] == listing else { return }  // its LAYOUT ended; the id may be another's now
            layoutListings[ref] = nil
            guard requests.isLayoutRunning(ref), let connection = connections.byID[ref.connection] else { return }
            switch result {
            case .failure(let error):
                failLayout(ref, ErrorReply(error.code, error.description))
            case .success(let window):
                begin(ref, paths: window.paths, firstIndex: UInt32(window.first), named: true, total: UInt32(window.total),
                      peer: connection.peerUID)
            }
        case .scanned(let work, let chunk):
            guard let run = running(work) else { return }
            run.chunksLeft -= 1
            send(chunk.packed, of: run)
            run.misses += chunk.misses
            run.want(chunk.placeholders)
            advance(run)
        case .opened(let work, let position, let result):
            guard let run = running(work) else { return }
            switch result {
            case .failure(let error):
                answer(position, of: run, error: ErrorReply(error.code, error.description))
            case .success(let source):
                let key = MediaInfoRecord.key(for: source)
                // Read meanwhile (an INFO, a RENDER of the file)? Else its read starts, or joins one.
                let body = requestStore.reader.withRendition(key) { _, bytes in MediaInfoRecord.body(bytes).map { Array($0) } } ?? nil
                if let body {
                    run.reading -= 1
                    let pending = !body.withUnsafeBytes { MediaInfo.hasPlaceholder(body: $0) }
                        && work.wantsPlaceholder(source, reader: requestStore.reader)
                    if pending { run.want([LayoutWork.PendingPlaceholder(position: position, infoKey: key, body: body)]) }
                    var packed: [UInt8] = []
                    body.withUnsafeBytes {
                        LayoutItem.pack(index: work.index(of: position), path: work.named ? work.paths[position] : nil,
                                        infoBody: $0, error: nil, infoPending: false, placeholderPending: pending, into: &packed)
                    }
                    send(packed, of: run)
                } else if let failure = LayoutWork.answeredFailure(store.failure(source: source.identity.bytes)) {
                    answer(position, of: run, error: failure)
                } else {
                    perform(requests.layoutInfoNeeded(work.ref, index: work.index(of: position), source: source, key: key))
                    return
                }
            }
            advance(run)
        case .placeholderOpened(let work, let pending, let result):
            guard let run = running(work) else { return }
            let index = work.index(of: pending.position)
            // Refused by the pixel limit, rendered meanwhile, or failed before: nothing to wait for.
            guard case .success(let (source, sniffed)) = result, refusal(of: sniffed, path: source.path) == nil else {
                return placeholderAnswered(pending, of: run)
            }
            let key = DaemonRequests.keys(of: LayoutWork.placeholderSpec, source: source).key
            guard !requestStore.contains(key), requestStore.failure(of: source) == nil else {
                return placeholderAnswered(pending, of: run)
            }
            run.placeholdersRendering[index] = pending
            perform(requests.layoutPlaceholderNeeded(work.ref, index: index, key: key) { id in
                requestStore.makeJob(id, key: key, source: source, spec: LayoutWork.placeholderSpec, sniffed: sniffed,
                                     stored: nil, wantsPreview: false)
            })
        }
    }

    /// The render one item waited for ended (`Requests.Action.layoutPlaceholder`): the item
    /// is sent again, with the placeholder its render stored, or without it.
    func layoutPlaceholderEnded(_ ref: RequestRef, index: UInt32) {
        guard let run = layouts[ref], requests.isLayoutRunning(ref),
              let pending = run.placeholdersRendering.removeValue(forKey: index) else { return }
        placeholderAnswered(pending, of: run)
    }

    /// An info job ended for one LAYOUT item (`Requests.Action.layoutInfo`).
    /// `key`: where the store keeps the file's info. Info without a placeholder is sent
    /// `placeholder_pending` (the render's own checks come when its file is opened).
    func layoutInfoRead(_ ref: RequestRef, index: UInt32, key: RenditionKey, _ result: Result<MediaInfo, ErrorReply>) {
        guard let run = layouts[ref], requests.isLayoutRunning(ref) else { return }
        let position = Int(index - run.work.firstIndex)
        switch result {
        case .success(let info):
            let pending = info.placeholder == nil
            if pending { run.want([LayoutWork.PendingPlaceholder(position: position, infoKey: key, body: info.body())]) }
            var packed: [UInt8] = []
            LayoutItem(index: index, path: run.work.named ? run.work.paths[position] : nil, outcome: .info(info),
                       placeholderPending: pending).packed(into: &packed)
            run.reading -= 1
            send(packed, of: run)
        case .failure(let error):
            answer(position, of: run, error: error)
        }
        advance(run)
    }

    /// Stops the runs whose LAYOUT the request table no longer has (cancelled, failed, its
    /// connection closed): their I/O work ends at the next file.
    /// The connection's other LAYOUTs take the placeholder renders they leave.
    func stopEndedLayouts(on connection: UInt64? = nil) {
        var freed: Set<UInt64> = []
        for (ref, run) in layouts where (connection == nil || ref.connection == connection) && !requests.isLayoutRunning(ref) {
            run.work.stopped.store(true, ordering: .relaxed)
            layouts[ref] = nil
            freed.insert(ref.connection)
        }
        for id in freed { renderPlaceholders(on: id) }
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

    /// Starts what the run may start now, and ends it if nothing is left.
    private func advance(_ run: LayoutRun) {
        readMisses(run)
        renderPlaceholders(on: run.work.ref.connection)
        finishIfDone(run)
    }

    /// Opens the next files of the connection's LAYOUTs that wait for a placeholder, and reads
    /// their headers (their renders are queued when they come: `placeholderOpened`): the
    /// newest LAYOUT's first, each's lowest index first, within `LayoutWork.maxPlaceholderRenders`
    /// and the user's limit of files open.
    private func renderPlaceholders(on id: UInt64) {
        guard let connection = connections.byID[id] else { return }
        let runs = layouts.values.filter { $0.work.ref.connection == id }.sorted { $0.sequence > $1.sequence }
        var inFlight = runs.reduce(0) { $0 + $1.placeholdersInFlight }
        let completions = completions
        for run in runs {
            let work = run.work
            while inFlight < LayoutWork.maxPlaceholderRenders, !run.placeholdersWanted.isEmpty {
                guard let lease = claimSource(for: connection) else {
                    // The user's sources are all held: if none by this connection's LAYOUTs (whose
                    // ends pump again), the items are answered as they are.
                    guard inFlight == 0, runs.allSatisfy({ $0.reading == 0 }) else { return }
                    for waiting in runs where !waiting.placeholdersWanted.isEmpty {
                        var packed: [UInt8] = []
                        for pending in waiting.placeholdersWanted { pack(pending, of: waiting, into: &packed) }
                        waiting.placeholdersWanted = []
                        send(packed, of: waiting)
                        finishIfDone(waiting)
                    }
                    return
                }
                let pending = run.placeholdersWanted.removeLast()
                run.placeholdersInFlight += 1
                inFlight += 1
                opener.io.run {
                    let opened = Result { () throws(RenderError) in
                        let source = try work.access.open(path: work.paths[pending.position], descriptor: nil,
                                                          peerUID: work.peer, lease: lease)
                        return (source, HeaderSniffer.sniff(source))
                    }
                    completions.post(.layout(.placeholderOpened(work, pending, opened)))
                }
            }
        }
    }

    /// An item that waited for its placeholder is sent again, final: its stored info read
    /// back (with the placeholder its render made), or as it was sent.
    private func placeholderAnswered(_ pending: LayoutWork.PendingPlaceholder, of run: LayoutRun) {
        var packed: [UInt8] = []
        pack(pending, of: run, into: &packed)
        run.placeholdersInFlight -= 1
        send(packed, of: run)
        renderPlaceholders(on: run.work.ref.connection)
        finishIfDone(run)
    }

    private func pack(_ pending: LayoutWork.PendingPlaceholder, of run: LayoutRun, into packed: inout [UInt8]) {
        let stored = requestStore.reader.peek(pending.infoKey) { _, bytes in MediaInfoRecord.body(bytes).map { Array($0) } } ?? nil
        let work = run.work
        (stored ?? pending.body).withUnsafeBytes {
            LayoutItem.pack(index: work.index(of: pending.position), path: work.named ? work.paths[pending.position] : nil,
                            infoBody: $0, error: nil, infoPending: false, placeholderPending: false, into: &packed)
        }
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
