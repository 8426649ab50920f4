import SystemCalls
import Foundation
import ViewerProtocol

/// Reading frames and queueing answers: no request bookkeeping (that is the request
/// table's) and no socket writes (those happen when the loop flushes `connections`).
extension Daemon {
    func handle(_ connection: Connection, events: UInt32) {
        if events & Epoll.writable != 0 { connections.touch(connection) }
        if events & (Epoll.readable | Epoll.hangup) != 0 { readAvailable(connection) }
    }

    private func readAvailable(_ connection: Connection) {
        guard !connection.readPaused && !connection.closing else { return }
        // A bounded number of reads per wakeup keeps one busy client from starving others.
        for _ in 0..<8 {
            let before = connection.descriptors.count
            let result = connection.read(into: &scratch, descriptors: &receivedFDs)
            stats.descriptorsReceived += UInt64(max(0, connection.descriptors.count - before))
            // Descriptors no frame claims pile up only for a broken or hostile client.
            if connection.descriptors.count > 64 {
                reject(connection, ErrorReply(.malformedFrame, "more than 64 descriptors sent ahead of their frames"))
                return
            }
            switch result {
            case .wouldBlock:
                return
            case .closed:
                connections.close(connection)  // the client went away; its requests have no one to answer
                return
            case .read(let more):
                processFrames(connection)
                if connection.readPaused || connection.closing || !more { return }
            }
        }
    }

    /// Handles the frames already read, until the connection's answers pile up past the
    /// outbound limit (reading pauses until the client reads them).
    func processFrames(_ connection: Connection) {
        while !connection.closing && connections.isOpen(connection) {
            if mustPauseReading(connection) {
                // Resumes when the client reads its answers, its opens finish, or (no socket
                // event says so: `resumeQuotaPaused` looks) its user's sources are closed.
                connection.readPaused = true
                if userHoldsAllSources(connection) { quotaPaused.insert(connection.id) }
                connections.touch(connection)
                return
            }
            let frame: Frame
            do throws(ProtocolError) {
                guard let next = try connection.decoder.next() else { return }
                frame = next
            } catch {
                stats.malformedFrames += 1
                reject(connection, ErrorReply(.malformedFrame, "\(error); closing the connection"))
                return
            }
            handleFrame(frame, on: connection)
        }
    }

    /// The peer uid of a connection, for the scheduler's turns. A job stays in the lane of the
    /// connection that asked first even after it closed (others still wait for it); its
    /// work is then queued for no user in particular (`UInt32.max`, as an unknown peer).
    func peerUID(of connection: UInt64) -> UInt32 {
        connections.byID[connection]?.peerUID ?? UInt32.max
    }

    /// Queues one answer (`Answers`); it goes out when the loop flushes.
    func send(_ connection: Connection, _ message: Message, requestID: UInt32) {
        answers.send(message, requestID: requestID, on: connection)
    }

    func reject(_ connection: Connection, _ error: ErrorReply) { answers.reject(connection, error) }

    /// Reading stops while the client has more unread than its outbound limit, answers held
    /// back, or many requests still opening, or while its user holds all the open sources it
    /// may (the next request waits in the socket rather than be refused).
    private func mustPauseReading(_ connection: Connection) -> Bool {
        connection.pendingOutbound > configuration.clientOutboundLimit || !connection.deferred.isEmpty
            || requests.isOpeningFull(connection.id)
            || userHoldsAllSources(connection)
    }

    private func userHoldsAllSources(_ connection: Connection) -> Bool {
        sourceQuota.count(of: connection.peerUID) >= sourceQuota.limit
    }

    /// Reads on (the frames that arrived while paused) once nothing holds reading back. Still
    /// held back by its user's sources, it is looked at again when they close.
    private func resumeReading(_ connection: Connection) {
        guard connection.readPaused else { return }
        guard !mustPauseReading(connection) else {
            if userHoldsAllSources(connection) { quotaPaused.insert(connection.id) }
            return
        }
        connection.readPaused = false
        processFrames(connection)
        connections.touch(connection)
    }

    /// Writes every answer queued since the last flush. A client that caught up gets its
    /// held-back answers, then its buffered frames are handled (which may queue more).
    func flush() {
        connections.flush(outboundLimit: configuration.clientOutboundLimit) { connection in
            answers.sendHeldBack(to: connection)
            resumeReading(connection)
        }
    }

    /// Connections paused because their user held all the sources it may read on once some
    /// are closed (a job ended, a hit was answered). Called on each turn of the loop.
    func resumeQuotaPaused() {
        guard !quotaPaused.isEmpty else { return }
        for id in quotaPaused {
            guard let connection = connections.byID[id] else {
                quotaPaused.remove(id)
                continue
            }
            guard !userHoldsAllSources(connection) else { continue }
            quotaPaused.remove(id)
            resumeReading(connection)
        }
    }

    /// A connection resumed by an opening request that finished: its reading may go on.
    func openingFinished(on id: UInt64) {
        if let connection = connections.byID[id], connection.readPaused { connections.touch(connection) }
    }
}
