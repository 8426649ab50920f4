// viewerd: the rendition cache daemon. Thin: the command line, the environment and the
// config file are read by `DaemonCommand` (ViewerDaemon), where they can be tested.
import Foundation
import ViewerDaemon

// The decode worker is this same executable, started by the daemon.
if CommandLine.arguments.dropFirst().first == "--worker" {
    exit(WorkerProcess.run(arguments: Array(CommandLine.arguments.dropFirst(2))))
}
exit(DaemonCommand.main(arguments: Array(CommandLine.arguments.dropFirst())))
