// viewerd-torture: hostile files, hostile clients, load and faults against the real daemon.
// See `Settings.usage`, torture/README.md and issue 9.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

signal(SIGPIPE, SIG_IGN)

let settings: Settings
do {
    settings = try Settings.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("viewerd-torture: \(error)\n\n\(Settings.usage)".utf8))
    exit(64)
}
exit(TortureRun(settings: settings).run())
