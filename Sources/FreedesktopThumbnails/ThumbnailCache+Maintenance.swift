#if canImport(Glibc)
import Glibc
#endif

/// What a file manager asks of the cache when files move, are copied or vanish (the D-Bus
/// `org.freedesktop.thumbnails.Cache1` interface): thumbnails follow their files, so a moved
/// folder of photos is not thumbnailed again.
extension ThumbnailCache {
    /// Moves the thumbnails (every flavor) of each `from` URI to its `to` URI, with the new
    /// `Thumb::URI`; when a `to` is a folder, the thumbnails of every file that was under
    /// `from` too. Pairs beyond the shorter list are ignored. Returns how many moved.
    @discardableResult
    public func move(from: [String], to: [String]) -> Int { transfer(from: from, to: to, keepSource: false) }

    /// As `move(from:to:)`, keeping the originals (a copied file has the same pixels).
    @discardableResult
    public func copy(from: [String], to: [String]) -> Int { transfer(from: from, to: to, keepSource: true) }

    /// Deletes the thumbnails (every flavor) and failure records of `uris`. Returns how many.
    @discardableResult
    public func delete(_ uris: [String]) -> Int {
        var removed = 0
        for uri in uris {
            for flavor in ThumbnailFlavor.allCases where unlink(path(of: uri, flavor: flavor)) == 0 { removed += 1 }
            for software in failureSoftware() where unlink(failurePath(of: uri, software: software)) == 0 { removed += 1 }
        }
        return removed
    }

    /// Deletes the thumbnails of files that no longer exist, among those whose `Thumb::URI` is
    /// one of `baseURIs` or under it (every thumbnail when `baseURIs` is empty), and, when
    /// `since` is not 0, whose `Thumb::MTime` is at most `since` (seconds since 1970). A
    /// thumbnail of a file that still exists is never deleted. Returns how many.
    @discardableResult
    public func cleanup(baseURIs: [String], since: UInt32) -> Int {
        var removed = 0
        for file in thumbnailFiles() {
            guard let keys = Self.keys(at: file), let uri = keys["Thumb::URI"] else { continue }
            guard baseURIs.isEmpty || baseURIs.contains(where: { Self.isUnder(uri, $0) }) else { continue }
            // (Tumbler writes the seconds with microseconds: the whole seconds decide)
            if since != 0, let mtime = keys["Thumb::MTime"].flatMap({ Int64($0.split(separator: ".").first ?? "") }),
               mtime > Int64(since) { continue }
            guard let original = Self.path(ofURI: uri) else { continue }  // not a local file: not ours to judge
            var info = stat()
            if stat(original, &info) != 0 && errno == ENOENT, unlink(file) == 0 { removed += 1 }
        }
        return removed
    }

    // MARK: Helpers

    /// The pairs' thumbnails retagged under their destinations. The cache is read once for the
    /// whole call, and only when some destination is a folder: a file manager that moves fifty
    /// folders reads each thumbnail's keys once, not fifty times.
    private func transfer(from: [String], to: [String], keepSource: Bool) -> Int {
        let pairs = zip(from, to).filter { $0 != $1 }.map { (source: $0, destination: $1, folder: Self.isFolder($1)) }
        // Kept as the pairs are carried out, so that a later pair finds what an earlier one moved in.
        var known = pairs.contains(where: \.folder) ? thumbnailURIs() : []
        var done = 0
        for (source, destination, folder) in pairs {
            var moves = [(source, destination)]
            if folder {
                moves += known.filter { $0 != source && Self.isUnder($0, source) }.map { ($0, destination + $0.dropFirst(source.count)) }
            }
            for (old, new) in moves {
                var moved = false
                for flavor in ThumbnailFlavor.allCases where retag(path(of: old, flavor: flavor), uri: new, to: path(of: new, flavor: flavor),
                                                                    keepSource: keepSource) {
                    done += 1
                    moved = true
                }
                if moved {
                    known.insert(new)
                    if !keepSource { known.remove(old) }
                }
            }
        }
        return done
    }

    /// Whether the local file a URI names is a folder.
    private static func isFolder(_ uri: String) -> Bool {
        var info = stat()
        guard let path = path(ofURI: uri) else { return false }
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// Writes the thumbnail at `file` under `destination` with `Thumb::URI` set to `uri`.
    private func retag(_ file: String, uri: String, to destination: String, keepSource: Bool) -> Bool {
        guard let bytes = Self.read(file), let retagged = try? PNGText.setting([("Thumb::URI", uri)], in: bytes),
              (try? write(retagged, to: destination)) != nil else { return false }
        if !keepSource { unlink(file) }
        return true
    }

    /// The URIs of every thumbnail in the cache (any flavor), from their keys.
    private func thumbnailURIs() -> Set<String> {
        Set(thumbnailFiles().compactMap { Self.keys(at: $0)?["Thumb::URI"] })
    }

    /// Whether `uri` is `base` or names something inside the folder `base`.
    static func isUnder(_ uri: String, _ base: String) -> Bool {
        let folder = base.hasSuffix("/") ? base : base + "/"
        return uri == base || uri.hasPrefix(folder)
    }

    /// Every thumbnail file of every flavor.
    private func thumbnailFiles() -> [String] {
        ThumbnailFlavor.allCases.flatMap { flavor in
            Self.names(in: "\(root)/\(flavor.rawValue)").filter { $0.hasSuffix(".png") }.map { "\(root)/\(flavor.rawValue)/\($0)" }
        }
    }

    /// The failure records' directories of every thumbnailer (`viewerd-0.9.0`, `gnome-thumbnail-factory`, …).
    private func failureSoftware() -> [String] { Self.names(in: root + "/fail") }

    private static func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
