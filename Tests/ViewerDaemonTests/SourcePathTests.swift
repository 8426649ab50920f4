import Testing
@testable import ViewerDaemon

@Suite("SourcePath")
struct SourcePathTests {
    @Test("folds . and .. lexically, never above /", arguments: [
        ("/srv/shared/a.png", "/srv/shared/a.png"),
        ("/srv/shared/../secret/a.png", "/srv/secret/a.png"),
        ("/srv//shared/./in/../a.png", "/srv/shared/a.png"),
        ("/../../etc/passwd", "/etc/passwd"),
        ("/srv/shared/", "/srv/shared"),
        ("/", "/"),
    ])
    func normalized(_ input: String, _ expected: String) {
        #expect(SourcePath.normalized(input) == expected)
    }
}
