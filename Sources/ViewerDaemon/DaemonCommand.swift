import Foundation
import ViewerLog
import ViewerProtocol

/// `viewerd` itself: reads the command line, the environment and the config file, then
/// serves, or checks the configuration.
///
/// ```swift
/// exit(DaemonCommand.main(arguments: Array(CommandLine.arguments.dropFirst())))
/// ```
public enum DaemonCommand {
    /// Runs `viewerd` with these arguments (the program name left out); returns the exit
    /// status: 0 success, 1 start failure, 64 usage error, 78 configuration error.
    ///
    /// - Parameter hooks: faults a test executable puts in (`TestHooks`); the product's main
    ///   passes none.
    public static func main(arguments: [String],
                            environment: [String: String] = ProcessInfo.processInfo.environment,
                            hooks: TestHooks = TestHooks()) -> Int32 {
        do throws(ConfigError) {
            let parsed = try DaemonArguments.parse(arguments)
            switch parsed.action {
            case .help:
                print(DaemonArguments.usage, terminator: "")
                return 0
            case .version:
                print("viewerd \(viewerdVersion) (protocol \(ProtocolVersion.current))")
                return 0
            case .run, .checkConfig:
                break
            }
            let settings = try Settings.resolve(parsed, environment: environment)
            if parsed.action == .checkConfig {
                print(settings.report, terminator: "")
                return 0
            }
            return serve(settings, hooks: hooks) { () throws(ConfigError) in
                try Settings.resolve(parsed, environment: environment)
            }
        } catch {
            Log.failure(error.description + (error.origin == nil ? " (viewerd --help lists the options)" : ""))
            return error.exitCode
        }
    }

    /// - Parameter reread: the settings again, from the same layers (SIGHUP).
    private static func serve(_ settings: Settings, hooks: TestHooks,
                              reread: @escaping () throws(ConfigError) -> Settings) -> Int32 {
        Log.setThreshold(settings.configuration.logLevel)
        let daemon: Daemon
        do throws(StartupError) {
            daemon = try Daemon(configuration: settings.configuration, hooks: hooks, reread: reread)
        } catch {
            Log.failure(error.description)
            return 1
        }
        if settings.configFileFound {
            Log.info("event=config file=\(Log.quote(settings.configFilePath))")
        }
        if let weakened = sandboxWarning(settings) { Log.warning(weakened) }
        daemon.run()
        return 0
    }
}

extension DaemonCommand {
    /// The start's warning when the decoders run with less than their whole sandbox, naming
    /// where the setting came from; nil when it is on.
    static func sandboxWarning(_ settings: Settings) -> String? {
        let detail = switch settings.configuration.sandbox {
        case .on: nil as String?
        case .noReadKill: "the daemon does not check the decoders' opens: one outside their view is refused by Landlock alone, unlogged"
        case .off: "decoders run without namespaces, Landlock or the system-call filter: a hostile file runs as this user"
        }
        guard let detail else { return nil }
        return "event=sandbox-weakened sandbox=\(settings.configuration.sandbox.name) " +
            "from=\(Log.quote(settings.source(of: .sandbox).description)) detail=\(Log.quote(detail))"
    }
}

/// The daemon's release version, reported in WELCOME and `--version`.
public let viewerdVersion = "0.1.0"
