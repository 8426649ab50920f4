import Foundation
import RenditionStore
import SystemCalls
import ViewerLog

/// Why the daemon could not start.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What the daemon opens before it serves, in the order that matters: signals and the
/// service manager's variables before any thread starts, the socket (and its lock) before
/// the cache directory, then the store.
struct DaemonResources {
    let signalFD: Int32
    let notifier: Notifier?
    let socketActivated: Bool
    /// The configuration as served: the inherited socket's path, resolved shared roots.
    let configuration: Configuration
    let listener: Listener
    /// Held for as long as the store is open: one store, one daemon.
    let cacheLock: CacheDirectoryLock
    let store: RenditionStore
    /// Handles of the shared roots that could be opened (a missing one is logged and not served).
    let sharedRoots: [SharedRoot]

    /// - Parameter hooks: a test executable's faults (the store's map size); none in the product.
    static func open(_ configuration: Configuration, hooks: TestHooks) throws(StartupError) -> DaemonResources {
        // Before any thread starts, so every thread inherits the blocked mask.
        let signalFD: Int32
        do throws(SystemError) { signalFD = try Posix.terminationSignals() } catch { throw StartupError("\(error)") }
        // Still before any thread: these unset the variables they read (workers must not
        // take the listening socket or talk to the service manager as if they were us).
        let activationEnvironment = SocketActivation.environment()
        let notifier = Notifier(environment: Notifier.environment())
        let inherited: SocketActivation.Inherited?
        do throws(SocketActivation.Failure) {
            inherited = try SocketActivation.take(environment: activationEnvironment)
        } catch {
            Posix.close(signalFD)
            throw StartupError("socket activation: \(error)")
        }
        // Every queued render holds its source open (the descriptor that proves access and
        // pins the identity): allow as many as the system lets us.
        Posix.raiseDescriptorLimit()
        var configuration = configuration
        if let inherited {
            if inherited.ignored > 0 { Log.warning("event=socket-activation ignored_descriptors=\(inherited.ignored)") }
            configuration.socketPath = inherited.path  // for logs and status: the address clients use
        }
        // Each shared root is opened by the administrator's name for it; other users' files
        // are opened beneath these handles, never by their own strings (SourceAccess).
        let sharedRoots = SharedRoot.openAll(configuration.sharedRoots)
        configuration.sharedRoots = sharedRoots.map(\.resolved)

        // The socket first: its lock tells whether another viewerd serves it, and a daemon
        // refused for that must leave nothing behind (not even a new cache directory).
        let listener: Listener
        do throws(Listener.Failure) {
            if let inherited {
                listener = Listener(inheritedFD: inherited.fd, path: inherited.path)
            } else {
                listener = try Listener(path: configuration.socketPath, group: configuration.socketGroup)
            }
        } catch {
            Posix.close(signalFD)
            throw StartupError("\(error)")
        }
        do throws(SystemError) {
            try Posix.makeDirectories(configuration.cacheDirectory, mode: 0o700)
        } catch {
            listener.close()
            throw StartupError("cannot create the cache directory \(configuration.cacheDirectory): \(error)")
        }
        guard access(configuration.cacheDirectory, W_OK) == 0 else {
            listener.close()
            throw StartupError("the cache directory \(configuration.cacheDirectory) is not writable")
        }
        // Before the store is opened: a second daemon on this store must not even open it.
        let cacheLock: CacheDirectoryLock
        do throws(StartupError) {
            cacheLock = try CacheDirectoryLock(directory: configuration.cacheDirectory)
        } catch {
            listener.close()
            throw error
        }
        var storeConfiguration = StoreConfiguration(directory: configuration.cacheDirectory,
                                                    budgetBytes: configuration.cacheBudgetBytes)
        if let bytes = hooks.storeMapSize {
            storeConfiguration.mapSize = bytes
            storeConfiguration.maximumMapSize = bytes
        }
        let store: RenditionStore
        do throws(StoreError) {
            store = try RenditionStore(storeConfiguration, log: { Log.warning($0) })
        } catch {
            listener.close()
            throw StartupError("cannot open the store in \(configuration.cacheDirectory): \(error)")
        }
        return DaemonResources(signalFD: signalFD, notifier: notifier, socketActivated: inherited != nil,
                               configuration: configuration, listener: listener, cacheLock: cacheLock, store: store, sharedRoots: sharedRoots)
    }
}
