import Testing
import ViewerProtocol

@Suite("DefaultPaths")
struct DefaultPathsTests {
    @Test("the socket lives under XDG_RUNTIME_DIR when it is set")
    func socketInRuntimeDirectory() {
        let env = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(DefaultPaths.socket(environment: env, uid: 1000) == "/run/user/1000/viewerd/viewerd.sock")
        #expect(DefaultPaths.socketDirectory(environment: env, uid: 1000) == "/run/user/1000/viewerd")
    }

    @Test("without XDG_RUNTIME_DIR, or with a relative one, the socket is in /tmp/viewerd-<uid>",
          arguments: [[:], ["XDG_RUNTIME_DIR": ""], ["XDG_RUNTIME_DIR": "run/user/1000"]])
    func socketInTmp(_ env: [String: String]) {
        #expect(DefaultPaths.socket(environment: env, uid: 1000) == "/tmp/viewerd-1000/viewerd.sock")
        #expect(DefaultPaths.socketDirectory(environment: env, uid: 1000) == "/tmp/viewerd-1000")
    }

    @Test("VIEWERD_SOCKET overrides both")
    func socketOverride() {
        let env = ["XDG_RUNTIME_DIR": "/run/user/1000", "VIEWERD_SOCKET": "/srv/thumbs.sock"]
        #expect(DefaultPaths.socket(environment: env, uid: 1000) == "/srv/thumbs.sock")
    }

    @Test("an empty VIEWERD_SOCKET is no override")
    func emptyOverride() {
        let env = ["XDG_RUNTIME_DIR": "/run/user/1000", "VIEWERD_SOCKET": ""]
        #expect(DefaultPaths.socket(environment: env, uid: 1000) == "/run/user/1000/viewerd/viewerd.sock")
    }

    @Test("the cache lives under XDG_CACHE_HOME when it is absolute")
    func cacheInXDG() {
        #expect(DefaultPaths.cacheDirectory(environment: ["XDG_CACHE_HOME": "/var/cache/me"], home: "/home/me")
                == "/var/cache/me/viewerd")
    }

    @Test("otherwise the cache is ~/.cache/viewerd",
          arguments: [[:], ["XDG_CACHE_HOME": ""], ["XDG_CACHE_HOME": "cache"]])
    func cacheInHome(_ env: [String: String]) {
        #expect(DefaultPaths.cacheDirectory(environment: env, home: "/home/me") == "/home/me/.cache/viewerd")
    }

    @Test("a client takes the per-user socket when it exists, else the system service's, else the per-user path")
    func clientSocketFallback() {
        let env = ["XDG_RUNTIME_DIR": "/run/user/1000"]
        let user = "/run/user/1000/viewerd/viewerd.sock"
        #expect(DefaultPaths.clientSocket(environment: env, uid: 1000) { [user, DefaultPaths.systemSocket].contains($0) } == user)
        #expect(DefaultPaths.clientSocket(environment: env, uid: 1000) { $0 == DefaultPaths.systemSocket } == "/run/viewerd/viewerd.sock")
        #expect(DefaultPaths.clientSocket(environment: env, uid: 1000) { _ in false } == user)
    }

    @Test("VIEWERD_SOCKET wins over both, even when it does not exist and the system socket does")
    func clientSocketOverride() {
        let env = ["XDG_RUNTIME_DIR": "/run/user/1000", "VIEWERD_SOCKET": "/srv/thumbs.sock"]
        #expect(DefaultPaths.clientSocket(environment: env, uid: 1000) { $0 == DefaultPaths.systemSocket } == "/srv/thumbs.sock")
        let empty = ["XDG_RUNTIME_DIR": "/run/user/1000", "VIEWERD_SOCKET": ""]
        #expect(DefaultPaths.clientSocket(environment: empty, uid: 1000) { $0 == DefaultPaths.systemSocket } == "/run/viewerd/viewerd.sock")
    }
}
