// viewerd-testing: viewerd with the faults the tests and the torture put in, where the product
// has none. Its daemon is viewerd's (`DaemonCommand.main`) with `TestHooks` read from this
// process's environment; its workers are this same executable (`--worker`), with `jobFault`
// as their job hook. Built by `swift build` and `swift build --build-tests` (the tests, the
// torture); not a product, so `make build` and `make install` never build or ship it.
//
//   VIEWERD_TEST_STORE_MAP=BYTES          the store's memory map, which may not grow
//   VIEWERD_TEST_SWEEP_INTERVAL_MS=N      the store's sweep every N ms instead of every 30 s
//   a file named viewerd-test-crash*, viewerd-test-hang*, probe-*: see `jobFault`
import Foundation
import ViewerDaemon

if CommandLine.arguments.dropFirst().first == "--worker" {
    exit(WorkerProcess.run(arguments: Array(CommandLine.arguments.dropFirst(2)), hook: jobFault))
}

/// A positive whole number from `name`, nil when unset; a bad value stops the start (64).
func positive(_ name: String, in environment: [String: String]) -> Int? {
    guard let text = environment[name] else { return nil }
    guard let value = Int(text), value > 0 else {
        FileHandle.standardError.write(Data("viewerd-testing: \(name): expected a whole number above 0, not \"\(text)\"\n".utf8))
        exit(64)
    }
    return value
}

let environment = ProcessInfo.processInfo.environment
var hooks = TestHooks()
hooks.storeMapSize = positive("VIEWERD_TEST_STORE_MAP", in: environment)
hooks.sweepInterval = positive("VIEWERD_TEST_SWEEP_INTERVAL_MS", in: environment).map { .milliseconds($0) }
exit(DaemonCommand.main(arguments: Array(CommandLine.arguments.dropFirst()), environment: environment, hooks: hooks))
