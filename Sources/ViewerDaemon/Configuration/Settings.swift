import Foundation
import ViewerProtocol

/// The daemon's effective configuration and where each setting came from.
///
/// Layers, later ones winning: the built-in defaults, the config file, `VIEWERD_*`
/// environment variables, flags.
///
/// ```swift
/// let arguments = try DaemonArguments.parse(["--workers", "2"])
/// let settings = try Settings.resolve(arguments, environment: ProcessInfo.processInfo.environment)
/// settings.source(of: .workers)   // .flag("--workers")
/// ```
public struct Settings: Sendable {
    /// What the daemon is started with.
    public private(set) var configuration: Configuration
    private var sources: [SettingKey: SettingSource] = [:]
    /// The config file consulted (the default one or `--config`).
    public private(set) var configFilePath: String
    /// Whether that file existed (a missing default file means built-in defaults).
    public private(set) var configFileFound = false

    /// The built-in defaults, before any layer.
    public init(defaults: Configuration, configFilePath: String) {
        self.configuration = defaults
        self.configFilePath = configFilePath
    }

    /// Reads every layer: the config file `arguments` name (or the default one), then the
    /// environment, then the flags.
    ///
    /// - Throws: `ConfigError` for a missing `--config` file, a file that does not parse, an
    ///   unknown key, or a bad value in any layer.
    public static func resolve(_ arguments: DaemonArguments, environment: [String: String],
                               uid: uid_t = getuid()) throws(ConfigError) -> Settings {
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        let path = arguments.configPath ?? ConfigFile.defaultPath(environment: environment, uid: uid, home: home)
        var settings = Settings(defaults: .defaults(environment: environment), configFilePath: path)
        if let file = try ConfigFile.load(path: path, required: arguments.configPath != nil) {
            settings.configFileFound = true
            try settings.apply(file)
        }
        try settings.applyEnvironment(environment)
        for flag in arguments.settings {
            try settings.set(flag.key, flag.value, from: .flag(flag.flag))
        }
        if let roots = arguments.sharedRoots {
            try settings.setSharedRoots(roots, from: .flag(SettingKey.sharedRoots.flag))
        }
        return settings
    }

    /// Applies every entry of a config file.
    public mutating func apply(_ file: ConfigFile) throws(ConfigError) {
        for entry in file.entries {
            let origin = SettingSource.file(file.path, line: entry.line)
            guard let key = SettingKey(rawValue: entry.key) else {
                throw ConfigError(origin, "unknown key \"\(entry.key)\"" + SettingKey.suggestion(for: entry.key))
            }
            try set(key, entry.value, from: origin)
        }
    }

    /// Applies the `VIEWERD_*` variable of each setting that has one set. Other variables
    /// are left alone (`VIEWERD_BUILD_DIR` and the like belong to tests and tools).
    ///
    /// - Throws: `ConfigError` for a bad value, and for `VIEWERD_SANDBOX`, which is not read
    ///   (`SettingKey.environmentName`).
    public mutating func applyEnvironment(_ environment: [String: String]) throws(ConfigError) {
        if environment[SettingKey.refusedVariable] != nil {
            throw ConfigError(.environment(SettingKey.refusedVariable),
                              "the sandbox is set only by --sandbox or the config file's \"sandbox\" key, not by the environment")
        }
        for key in SettingKey.allCases {
            guard let name = key.environmentName, let value = environment[name] else { continue }
            try set(key, value, from: .environment(name))
        }
    }

    /// Sets one setting from its text.
    ///
    /// - Throws: `ConfigError` from `source` when the text is not a valid value.
    public mutating func set(_ key: SettingKey, _ text: String, from source: SettingSource) throws(ConfigError) {
        do throws(SettingKey.Invalid) {
            try key.apply(text, to: &configuration)
        } catch {
            // The flag or variable names the setting already; a file line needs its key.
            let subject = if case .file = source { "\(key.rawValue): " } else { "" }
            throw ConfigError(source, "\(subject)\(error.message), not \"\(text)\"")
        }
        sources[key] = source
    }

    /// Sets the shared roots from a list (repeated `--shared-root` flags).
    public mutating func setSharedRoots(_ roots: [String], from source: SettingSource) throws(ConfigError) {
        for root in roots where !root.hasPrefix("/") {
            throw ConfigError(source, "shared root \"\(root)\": expected an absolute path")
        }
        configuration.sharedRoots = roots
        sources[.sharedRoots] = source
    }

    /// Where the effective value of `key` came from.
    public func source(of key: SettingKey) -> SettingSource { sources[key] ?? .builtIn }

    /// The effective value of `key`, written as the config file would take it.
    public func value(of key: SettingKey) -> String { key.format(configuration) }

    /// What `viewerd --check-config` prints: the config file, then one line per setting,
    /// `key = value  (source)`.
    ///
    /// ```
    /// config file: /etc/viewerd/viewerd.conf
    /// socket              = /run/viewerd/viewerd.sock  (default)
    /// cache-budget        = 4G                         (/etc/viewerd/viewerd.conf:3)
    /// ```
    public var report: String {
        var text = "config file: \(configFilePath)" + (configFileFound ? "" : " (not found; defaults apply)") + "\n"
        let keyWidth = SettingKey.allCases.map(\.rawValue.count).max()!
        let valueWidth = SettingKey.allCases.map { value(of: $0).count }.max()!
        for key in SettingKey.allCases {
            let value = value(of: key)
            text += key.rawValue.padding(toLength: keyWidth, withPad: " ", startingAt: 0) + " = "
            text += value.padding(toLength: valueWidth, withPad: " ", startingAt: 0) + "  (\(source(of: key)))\n"
        }
        return text
    }
}

/// Where a setting's value came from.
public enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    /// The built-in default.
    case builtIn
    /// A line of a config file (line 0: the file as a whole).
    case file(String, line: Int)
    /// A `VIEWERD_*` environment variable.
    case environment(String)
    /// A command-line flag, as written.
    case flag(String)

    public var description: String {
        switch self {
        case .builtIn: "default"
        case .file(let path, let line): line > 0 ? "\(path):\(line)" : path
        case .environment(let name): name
        case .flag(let flag): flag
        }
    }
}

/// A configuration the daemon cannot start with: a message prefixed with where the bad
/// value came from, `file:line: `, `VIEWERD_WORKERS: ` or `--workers: `.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the problem is; nil for a command line that does not parse at all.
    public let origin: SettingSource?
    public let message: String

    public init(_ origin: SettingSource?, _ message: String) {
        self.origin = origin
        self.message = message
    }

    /// A command line that does not parse (an unknown option, a missing value).
    public static func usage(_ message: String) -> ConfigError { ConfigError(nil, message) }

    public var description: String {
        guard let origin else { return message }
        return "\(origin): \(message)"
    }

    /// True for a problem on the command line rather than in the file or environment.
    public var isUsage: Bool {
        switch origin {
        case nil, .flag: true
        default: false
        }
    }

    /// 64 (EX_USAGE) for a bad command line, 78 (EX_CONFIG) for a bad file or environment.
    public var exitCode: Int32 { isUsage ? 64 : 78 }
}
