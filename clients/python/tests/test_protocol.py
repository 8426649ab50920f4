"""The wire codec against the golden vectors in protocol/vectors, with no daemon."""
from __future__ import annotations

import os
import struct
import unittest

import support  # noqa: F401  (puts the package on sys.path)
from support import all_vectors, REPO
from viewerd import protocol as p

# The vectors' order in protocol/vectors/README.md, fed back to back below.
VECTOR_ORDER = ["hello", "welcome", "render", "render-minimal", "result", "error", "stats", "stats-reply", "ping",
                "pong", "render-descriptor", "preview", "cancel", "cancelled", "set-priority", "prefetch", "ack",
                "trim", "stop-prefetch", "stop-prefetch-all", "invalidate", "render-video", "info", "info-reply",
                "info-reply-hdr",
                "render-region", "render-tile", "render-source-info", "result-source", "result-partial",
                "render-shared-memory", "result-shared-memory", "info-reply-placeholder", "layout", "layout-paths",
                "layout-items", "render-transform"]
# The vectors whose header carries the descriptor flag.
FLAGGED = {"render-descriptor", "result-shared-memory"}

EXPECTED = {
    "hello": (0, p.Hello(1, 1, "example")),
    "welcome": (0, p.Welcome(1, 1048576, 268439552, "0.1.0", p.Capability(0x1F), 4096)),
    "render": (7, p.Render("/pictures/a.jpg", p.Spec(320, 240, p.Fit.FILL, p.Crop.ATTENTION, p.Format.JPEG, 85,
                                                      0x102030, 0, True), p.Priority.VISIBLE, p.Delivery.FINAL)),
    "render-minimal": (8, p.Render("/pictures/a.jpg", p.Spec(256))),
    "result": (7, p.Result(p.Format.JPEG, 320, 240, b"\xff\xd8\xff\xd9", True)),
    "error": (9, p.Error(200, "no such file: /pictures/missing.jpg")),
    "stats": (10, p.Stats()),
    "stats-reply": (10, p.StatsReply({"requests": 3, "hits": 1})),
    "ping": (11, p.Ping()),
    "pong": (11, p.Pong()),
    "render-descriptor": (12, p.Render("/pictures/b.jpg", p.Spec(256, 256), p.Priority.VISIBLE,
                                       p.Delivery.OPPORTUNISTIC, True)),
    "preview": (12, p.Preview(p.Format.JPEG, 256, 192, b"\xff\xd8\xff\xd9", False)),
    "cancel": (12, p.Cancel()),
    "cancelled": (12, p.Cancelled()),
    "set-priority": (7, p.SetPriority(p.Priority.PREFETCH)),
    "prefetch": (13, p.Prefetch(["/pictures/c.jpg", "/pictures/d.jpg"], p.Spec(256, 256, format=p.Format.WEBP))),
    "ack": (13, p.Ack(2)),
    "trim": (17, p.Trim(209715200)),
    "stop-prefetch": (14, p.StopPrefetch(["/pictures/d.jpg"], p.Spec(256, 256, format=p.Format.WEBP))),
    "stop-prefetch-all": (15, p.StopPrefetchAll()),
    "invalidate": (16, p.Invalidate("/pictures", True)),
    "render-video": (18, p.Render("/videos/clip.mp4", p.Spec(256, 256, time_ms=1500), p.Priority.VISIBLE)),
    "info": (19, p.Info("/pictures/a.jpg")),
    "info-reply": (19, p.InfoReply(p.MediaKind.VIDEO, 1920, 1080, 12345, 370, 1, "mp4/h264", False)),
    "info-reply-hdr": (19, p.InfoReply(p.MediaKind.VIDEO, 3840, 2160, 5000, 150, 1, "mov/hevc", False,
                                       p.HDR(p.HDRTransfer.HLG, 9, 1000))),
    "render-region": (20, p.Render("/pictures/a.jpg", p.Spec(500, 500, region=(2000, 1000, 1000, 1000)),
                                   p.Priority.VISIBLE)),
    "render-tile": (21, p.Render("/pictures/a.jpg", p.Spec(tile=p.TileAddress(12, 11, 7)), p.Priority.VISIBLE)),
    "render-source-info": (22, p.Render("/pictures/a.jpg", p.Spec(256, 256), p.Priority.VISIBLE, source_info=True)),
    "result-source": (22, p.Result(p.Format.JPEG, 256, 192, b"\xff\xd8\xff\xd9", False,
                                   p.InfoReply(p.MediaKind.PHOTO, 4000, 3000, format="jpeg"))),
    "result-partial": (23, p.Result(p.Format.JPEG, 256, 170, b"\xff\xd8\xff\xd9", False, source_partial=True)),
    "render-shared-memory": (24, p.Render("/pictures/a.jpg", p.Spec(2560, 1440, format=p.Format.RAW), p.Priority.VISIBLE,
                                          shared_memory=True)),
    "result-shared-memory": (24, p.Result(p.Format.RAW, 2560, 1440, b"", True, shared_bytes=2560 * 1440 * 4)),
    "info-reply-placeholder": (24, p.InfoReply(p.MediaKind.PHOTO, 4000, 3000, format="jpeg",
                                               placeholder=bytes.fromhex("5f1706558e7c057b6677779178b77674837055f7e9"))),
    "layout": (25, p.Layout(folder="/pictures/2026", order=p.LayoutOrder.MODIFIED, limit=500)),
    "layout-paths": (26, p.Layout(paths=["/pictures/a.jpg", "/videos/clip.mp4"])),
    "layout-items": (25, p.LayoutItems(3, [
        p.LayoutItem(0, "/pictures/2026/b.jpg", info=p.InfoReply(p.MediaKind.PHOTO, 4000, 3000, format="jpeg")),
        p.LayoutItem(1, "/pictures/2026/a.jpg", error=p.Error(301, "corrupt image")),
        p.LayoutItem(2, "/pictures/2026/c.heic", info_pending=True)])),
    "render-transform": (27, p.Render("/pictures/a.jpg", p.Spec(400, 300, p.Fit.STRETCH, format=p.Format.GIF, rotation=90,
                                                             mirror=True, colour=p.Colour.GRAY), p.Priority.VISIBLE)),
}


def read_vector(name: str) -> bytes:
    with open(os.path.join(REPO, "protocol", "vectors", name + ".bin"), "rb") as f:
        return f.read()


class VectorTests(unittest.TestCase):
    def test_every_vector_is_listed(self) -> None:
        names = {os.path.basename(path)[:-4] for path in all_vectors()}
        self.assertEqual(names, set(EXPECTED))
        self.assertEqual(set(VECTOR_ORDER), set(EXPECTED))

    def test_every_message_type_has_a_vector(self) -> None:
        types = {p.FrameDecoder().feed(read_vector(name))[0].type for name in EXPECTED}
        self.assertEqual(types, {int(t) for t in p.MessageType})

    def test_decodes_each_vector_to_its_message(self) -> None:
        for name, (request_id, message) in EXPECTED.items():
            with self.subTest(vector=name):
                frames = p.FrameDecoder().feed(read_vector(name))
                self.assertEqual(len(frames), 1)
                self.assertEqual(frames[0].request_id, request_id)
                self.assertEqual(frames[0].carries_descriptor, name in FLAGGED)
                self.assertEqual(p.decode(frames[0]), message)

    def test_reencodes_each_vector_byte_for_byte(self) -> None:
        for name, (request_id, message) in EXPECTED.items():
            if name == "render-minimal":
                continue  # leaves fields out; the encoder writes them all
            with self.subTest(vector=name):
                flags = p.FLAG_DESCRIPTOR if name in FLAGGED else 0
                self.assertEqual(p.encode(message, request_id, flags), read_vector(name))

    def test_all_vectors_back_to_back_fed_one_byte_at_a_time(self) -> None:
        stream = b"".join(read_vector(name) for name in VECTOR_ORDER)
        decoder = p.FrameDecoder()
        frames = []
        for i in range(len(stream)):
            frames += decoder.feed(stream[i:i + 1])
        self.assertEqual(decoder.buffered, 0)
        self.assertEqual([p.decode(f) for f in frames], [EXPECTED[name][1] for name in VECTOR_ORDER])

    def test_every_split_in_two(self) -> None:
        stream = b"".join(read_vector(name) for name in VECTOR_ORDER)
        for cut in range(len(stream) + 1):
            decoder = p.FrameDecoder()
            frames = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
            self.assertEqual(len(frames), len(VECTOR_ORDER), f"cut at {cut}")


class ResultSourceTests(unittest.TestCase):
    def test_the_source_comes_before_the_bytes_which_stay_last(self) -> None:
        frame = p.FrameDecoder().feed(read_vector("result-source"))[0]
        fields = p.parse_fields(frame.body)
        self.assertEqual(list(fields), [1, 2, 3, 4, 6, 5])
        self.assertTrue(frame.body.endswith(b"\x05\x00\x04\x00\x00\x00\xff\xd8\xff\xd9"))

    def test_a_result_without_it_keeps_the_40_byte_prefix(self) -> None:
        body = p.encode_body(p.Result(p.Format.JPEG, 1, 1, b"xy"))[1]
        self.assertEqual(len(body), 40 + 2)
        self.assertIsNone(p.decode(p.Frame(p.MessageType.RESULT, 1, body)).source)


class SharedMemoryResultTests(unittest.TestCase):
    def test_a_result_has_its_bytes_inline_or_in_the_descriptor_never_both(self) -> None:
        body = p.encode_body(p.Result(p.Format.RAW, 1, 1, b"", shared_bytes=4))[1]
        self.assertEqual(list(p.parse_fields(body)), [1, 2, 3, 4, 8])
        both = body + p._Writer().raw(5, b"abcd").bytes()
        with self.assertRaises(p.MalformedFrame):
            p.decode(p.Frame(p.MessageType.RESULT, 1, both))


class ResultPartialTests(unittest.TestCase):
    def test_source_partial_comes_before_the_bytes_and_is_written_only_when_true(self) -> None:
        frame = p.FrameDecoder().feed(read_vector("result-partial"))[0]
        self.assertEqual(list(p.parse_fields(frame.body)), [1, 2, 3, 4, 7, 5])
        self.assertTrue(p.decode(frame).source_partial)
        whole = p.encode_body(p.Result(p.Format.JPEG, 1, 1, b"xy"))[1]
        self.assertNotIn(7, p.parse_fields(whole))
        self.assertFalse(p.decode(p.Frame(p.MessageType.RESULT, 1, whole)).source_partial)

    def test_repr_says_so(self) -> None:
        self.assertIn("source_partial=True", repr(p.Result(p.Format.JPEG, 1, 1, b"xy", source_partial=True)))
        self.assertNotIn("source_partial", repr(p.Result(p.Format.JPEG, 1, 1, b"xy")))


class BodyRuleTests(unittest.TestCase):
    def field(self, tag: int, value: bytes) -> bytes:
        return struct.pack("<HI", tag, len(value)) + value

    def test_unknown_tags_are_ignored_and_order_does_not_matter(self) -> None:
        body = self.field(99, b"xyz") + self.field(2, struct.pack("<H", 1)) + self.field(1, struct.pack("<H", 1))
        self.assertEqual(p.decode(p.Frame(p.MessageType.HELLO, 0, body)), p.Hello(1, 1, ""))

    def test_malformed_bodies(self) -> None:
        one = struct.pack("<H", 1)
        cases = {
            "repeated unknown tag": self.field(1, one) + self.field(2, one) + self.field(9, b"") + self.field(9, b""),
            "field header cut short": self.field(1, one) + self.field(2, one) + b"\x03\x00",
            "length past the end": self.field(1, one) + self.field(2, one) + struct.pack("<HI", 3, 10) + b"ab",
            "wrong width": self.field(1, b"\x01") + self.field(2, one),
            "missing required": self.field(1, one),
            "not UTF-8": self.field(1, one) + self.field(2, one) + self.field(3, b"\xff"),
        }
        for name, body in cases.items():
            with self.subTest(case=name):
                with self.assertRaises(p.MalformedFrame):
                    p.decode(p.Frame(p.MessageType.HELLO, 0, body))

    def test_undefined_enum_value_and_quality_over_100(self) -> None:
        path = self.field(1, b"/a.jpg")
        for body in (path + self.field(4, b"\x07"), path + self.field(7, bytes([101])), path + self.field(5, b"\x00")):
            with self.assertRaises(p.MalformedFrame):
                p.decode(p.Frame(p.MessageType.RENDER, 1, body))

    def test_bad_header_is_fatal(self) -> None:
        with self.assertRaises(p.MalformedFrame):
            p.FrameDecoder().feed(b"XWRD" + bytes(12))
        with self.assertRaises(p.MalformedFrame):
            p.FrameDecoder(max_body=10).feed(p.Frame(p.MessageType.PING, 1, bytes(11)).encode())

    def test_unassigned_type_is_skipped_by_its_length(self) -> None:
        stream = p.Frame(0x99, 5, b"abc").encode() + read_vector("pong")
        frames = p.FrameDecoder().feed(stream)
        with self.assertRaises(ValueError):
            p.decode(frames[0])
        self.assertEqual(p.decode(frames[1]), p.Pong())


if __name__ == "__main__":
    unittest.main()
