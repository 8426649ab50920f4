// Writes vectors.json from the reference implementation itself (evanw/thumbhash, js/thumbhash.js):
//   node protocol/vectors/thumbhash/generate.mjs /path/to/thumbhash.js > protocol/vectors/thumbhash/vectors.json
// The inputs are made here from integers only, so the file is the same on every machine; the
// hashes and decoded pixels are the reference's answers for them. Run once; the tests read
// the committed file and need no Node.
import { pathToFileURL } from 'node:url'
const ref = await import(pathToFileURL(process.argv[2]).href)

// A smooth picture with some detail: integer arithmetic only (no Math.sin), so it is exact.
function picture(w, h, seed, alpha) {
  const rgba = new Uint8Array(w * h * 4)
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    const i = (y * w + x) * 4
    const u = Math.floor(x * 255 / Math.max(1, w - 1)), v = Math.floor(y * 255 / Math.max(1, h - 1))
    rgba[i] = (u * (seed % 3 + 1) + seed * 37) % 256
    rgba[i + 1] = (v + ((x * y * seed) >> 4)) % 256
    rgba[i + 2] = (255 - ((u + v) >> 1) + seed * 11) % 256
    const dx = x - w / 2, dy = y - h / 2
    rgba[i + 3] = alpha ? Math.max(0, 255 - Math.floor((dx * dx + dy * dy) * 1020 / (w * w + h * h))) : 255
  }
  return rgba
}
function flat(w, h, r, g, b, a) {
  const rgba = new Uint8Array(w * h * 4)
  for (let i = 0; i < w * h; i++) rgba.set([r, g, b, a], i * 4)
  return rgba
}
const hex = (bytes) => Buffer.from(bytes).toString('hex')

const inputs = [
  ['landscape', 40, 30, picture(40, 30, 1, false)],
  ['portrait', 24, 40, picture(24, 40, 2, false)],
  ['square-alpha', 32, 32, picture(32, 32, 3, true)],
  ['wide-alpha', 48, 12, picture(48, 12, 4, true)],
  ['panorama', 100, 9, picture(100, 9, 5, false)],
  ['tall', 6, 100, picture(6, 100, 6, false)],
  ['flat-red', 16, 12, flat(16, 12, 220, 30, 40, 255), true],
  ['one-pixel', 1, 1, flat(1, 1, 10, 200, 90, 255), true],
  ['transparent', 8, 8, flat(8, 8, 0, 0, 0, 0), true],
]
// A flat picture's varying terms are rounding noise (about 1e-17) divided by its own largest,
// so their nibbles follow the last bit of the libm's cos (V8's fdlibm is not glibc's); its
// scales round to 0, so the decoder multiplies them away. `ac_noise` marks such cases: an
// encoder must match their header bytes and decoded pixels, not every nibble.
const cases = inputs.map(([name, w, h, rgba, acNoise = false]) => {
  const hash = ref.rgbaToThumbHash(w, h, rgba)
  const image = ref.thumbHashToRGBA(hash)
  const avg = ref.thumbHashToAverageRGBA(hash)
  return {
    name, width: w, height: h, rgba: hex(rgba), hash: hex(hash), ac_noise: acNoise,
    decoded: { width: image.w, height: image.h, rgba: hex(image.rgba) },
    average: [avg.r, avg.g, avg.b, avg.a],
    aspect_ratio: ref.thumbHashToApproximateAspectRatio(hash),
  }
})
// Bytes that are not a hash: every decoder answers none (nil, None) for each.
const good = cases[0].hash
const invalid = [
  ['empty', ''],
  ['one-byte', '00'],
  ['header-only', good.slice(0, 10)],
  ['one-byte-short', good.slice(0, -2)],
  ['one-byte-long', good + '00'],
  ['alpha-without-alpha-byte', '000080' + '0700'],
  ['zero-sides', good.slice(0, 6) + '00' + good.slice(8)],
]
process.stdout.write(JSON.stringify({
  reference: 'https://github.com/evanw/thumbhash js/thumbhash.js (rgbaToThumbHash, thumbHashToRGBA)',
  cases, invalid: invalid.map(([name, hash]) => ({ name, hash })),
}, null, 1) + '\n')
