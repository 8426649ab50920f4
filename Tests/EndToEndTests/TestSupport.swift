// The daemon launcher (`DaemonProcess`), the raw wire client (`RawSocket`), `eventually` and
// `runTool` are this target's vocabulary, shared with the bench and the torture: every file
// here sees them without an import of its own.
@_exported import ViewerTestSupport
