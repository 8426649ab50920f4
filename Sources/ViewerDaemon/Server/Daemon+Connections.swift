import SystemCalls
import CPosix
import Foundation
import ViewerProtocol

/// Accepting, reading, flushing and closing connections: bytes and epoll, no request
/// bookkeeping (a closed connection's requests are the in-flight table's to settle).
extension Daemon {
    func acceptConnections() {
        while true {
            let fd = vd_accept(listener.fd)
            if fd < 0 {
                if errno != EAGAIN && errno != ECONNABORTED {
                    Log.warning("event=accept-failed error=\(Log.quote(SystemError("accept4").description))")
                }
                return
            }
            let connection = Connection(id: nextConnectionID, fd: fd, maxRequestBody: configuration.maxRequestBody)
            nextConnectionID += 1
            var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
            if vd_peer_credentials(fd, &pid, &uid, &gid) == 0 {
                connection.peerUID = uid
                connection.peerPID = pid
            }
            stats.connectionsAccepted += 1
            connections[fd] = connection
            connectionsByID[connection.id] = connection
            updateInterest(connection)
        }
    }

    func handle(_ connection: Connection, events: UInt32) {
        if events & Epoll.writable != 0 { dirty[connection.id] = connection }
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
                close(connection)  // the client went away; its requests have no one to answer
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
        while !connection.closing && connections[connection.fd] === connection {
            if connection.pendingOutbound > configuration.clientOutboundLimit {
                connection.readPaused = true  // resumes when the client reads its answers
                dirty[connection.id] = connection
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

    /// Sends a connection-level error (request id 0) and closes once it is sent.
    func reject(_ connection: Connection, _ error: ErrorReply) {
        send(connection, .error(error), requestID: 0)
        connection.closing = true
    }

    /// Queues one answer; it goes out when the loop flushes.
    func send(_ connection: Connection, _ message: Message, requestID: UInt32) {
        if case .error(let reply) = message { count(reply) }
        connection.enqueue(message, requestID: requestID)
        dirty[connection.id] = connection
    }

    func count(_ error: ErrorReply) {
        stats.errors += 1
        stats.errorsByCode[error.rawCode, default: 0] += 1
    }

    /// Writes what each touched connection has queued, resumes reading those whose client
    /// caught up (their buffered frames may touch more connections), and updates epoll.
    /// Answers are only ever written here, after the events that made them, so no frame is
    /// read in the middle of another's answers.
    func flushDirty() {
        while !dirty.isEmpty {
            let batch = dirty
            dirty.removeAll(keepingCapacity: true)
            for connection in batch.values where connections[connection.fd] === connection {
                guard connection.flush() else {
                    close(connection)
                    continue
                }
                if connection.readPaused && connection.pendingOutbound < configuration.clientOutboundLimit / 2 {
                    connection.readPaused = false
                    processFrames(connection)  // frames that arrived while paused
                }
                updateInterest(connection)
            }
        }
    }

    func updateInterest(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        if connection.closing && connection.pendingOutbound == 0 {
            close(connection)
            return
        }
        let events = connection.wantedEvents
        guard events != connection.registeredEvents else { return }
        do throws(SystemError) {
            if let registered = connection.registeredEvents, registered != events {
                try epoll.modify(connection.fd, events: events)
            } else {
                try epoll.add(connection.fd, events: events)
            }
            connection.registeredEvents = events
        } catch {
            Log.warning("event=epoll-failed error=\(Log.quote(error.description))")
            close(connection)
        }
    }

    func close(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        epoll.remove(connection.fd)
        Posix.close(connection.fd)
        connections[connection.fd] = nil
        connectionsByID[connection.id] = nil
        dirty[connection.id] = nil
        perform(inFlight.connectionClosed(connection.id))
        for fd in connection.descriptors { Posix.close(fd) }
        connection.descriptors.removeAll()
    }
}
