import Testing
@testable import ViewerDaemon

/// What a worker's environment holds: the daemon's fontconfig and XDG setup, nothing else of
/// its environment, and what keeps libraries from doing on their own what the sandbox kills.
@Suite("WorkerEnvironment")
struct WorkerEnvironmentTests {
    @Test("a user's font setup reaches the worker; the session's sockets and tokens do not")
    func kept() {
        let environment = WorkerEnvironment(from: ["HOME": "/home/ann", "FONTCONFIG_FILE": "/home/ann/fc.conf",
                                                   "XDG_DATA_DIRS": "/usr/share", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/bus",
                                                   "SSH_AUTH_SOCK": "/run/ssh", "GIO_USE_VFS": "gvfs"])
        #expect(environment.variables["HOME"] == "/home/ann")
        #expect(environment.variables["FONTCONFIG_FILE"] == "/home/ann/fc.conf")
        #expect(environment.variables["DBUS_SESSION_BUS_ADDRESS"] == nil)
        #expect(environment.variables["SSH_AUTH_SOCK"] == nil)
        // GIO's local VFS whatever the session says: gvfs would talk D-Bus (a socket: a kill).
        #expect(environment.variables["GIO_USE_VFS"] == "local")
    }

    @Test("without HOME the worker still has one, so GLib does not ask the user database (nscd's socket kills)")
    func home() {
        #expect(WorkerEnvironment(from: [:]).variables["HOME"] == "/nonexistent")
    }

    @Test("a worker's OpenMP (LibRaw's development) has one thread, whatever the daemon's environment says")
    func oneOpenMPThread() {
        #expect(WorkerEnvironment(from: [:]).variables["OMP_NUM_THREADS"] == "1")
        #expect(WorkerEnvironment(from: ["OMP_NUM_THREADS": "8"]).variables["OMP_NUM_THREADS"] == "1")
    }
}
