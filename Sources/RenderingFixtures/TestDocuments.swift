/// Small PDFs written by hand, for the tests of the vector loaders. (The worker's warm-up PDF,
/// which loads poppler's fonts before its sandbox closes, is written out in `WorkerSandbox`.)
public enum TestDocuments {
    /// A one-page PDF: a red square filling the left half of a width × height page (points).
    public static func pdf(width: Int, height: Int) -> [UInt8] {
        let content = "1 0 0 rg 0 0 \(width / 2) \(height) re f\n"
        return pdf(objects: [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 \(width) \(height)] /Contents 4 0 R >>",
            "<< /Length \(content.utf8.count) >>\nstream\n\(content)endstream",
        ])
    }

    /// A PDF of these objects (numbered from 1, the first the catalog), with its cross-reference
    /// table and trailer.
    public static func pdf(objects: [String]) -> [UInt8] {
        var out = "%PDF-1.4\n"
        var offsets: [Int] = []
        for (i, body) in objects.enumerated() {
            offsets.append(out.utf8.count)
            out += "\(i + 1) 0 obj\n\(body)\nendobj\n"
        }
        let xref = out.utf8.count
        out += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for offset in offsets { out += String(repeating: "0", count: 10 - String(offset).count) + "\(offset) 00000 n \n" }
        out += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        return Array(out.utf8)
    }
}
