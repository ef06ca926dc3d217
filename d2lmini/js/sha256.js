  /* ---- d2lmini/js/sha256.js: SHA-256 in plain JavaScript -------------
   * FIPS 180-4's SHA-256, so that the page checks its model's files in
   * every browser: crypto.subtle exists only in a secure context (https,
   * or a page from this computer), and a page served over plain http
   * from another host would otherwise run weights it cannot check.
   * Checked against Python's hashlib (tests/test_live.py). */

  // The first 32 bits of the fractional parts of the cube roots of the
  // first 64 primes (as signed 32-bit integers: the sums wrap anyway).
  const SHA256_K = Int32Array.from([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);

  /** The SHA-256 of bytes (an ArrayBuffer or a Uint8Array) as 64
   * lowercase hex digits, like Python's hashlib.sha256(b).hexdigest(). */
  function sha256Hex(data) {
    const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
    const n = bytes.length, w = new Int32Array(64);
    const H = Int32Array.from([
      0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    const rotr = (x, k) => (x >>> k) | (x << (32 - k));
    // One 64-byte block of m, from byte o.
    const block = (m, o) => {
      for (let i = 0; i < 16; i++, o += 4) {
        w[i] = (m[o] << 24) | (m[o + 1] << 16) | (m[o + 2] << 8) | m[o + 3];
      }
      for (let i = 16; i < 64; i++) {
        const x = w[i - 15], y = w[i - 2];
        const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
        const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let a = H[0], b = H[1], c = H[2], d = H[3];
      let e = H[4], f = H[5], g = H[6], h = H[7];
      for (let i = 0; i < 64; i++) {
        const s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        const t1 = (h + s1 + ((e & f) ^ (~e & g)) + SHA256_K[i] + w[i]) | 0;
        const s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        h = g; g = f; f = e; e = (d + t1) | 0;
        d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      H[0] = (H[0] + a) | 0; H[1] = (H[1] + b) | 0;
      H[2] = (H[2] + c) | 0; H[3] = (H[3] + d) | 0;
      H[4] = (H[4] + e) | 0; H[5] = (H[5] + f) | 0;
      H[6] = (H[6] + g) | 0; H[7] = (H[7] + h) | 0;
    };
    const whole = n - (n % 64);
    for (let o = 0; o < whole; o += 64) block(bytes, o);
    // The rest, 0x80, zeros and the length in bits (64-bit big-endian)
    // fill one or two last blocks.
    const tail = new Uint8Array(n % 64 < 56 ? 64 : 128);
    tail.set(bytes.subarray(whole));
    tail[n % 64] = 0x80;
    const end = tail.length;
    const high = Math.floor(n / 0x20000000), low = (n * 8) >>> 0;
    tail[end - 8] = high >>> 24; tail[end - 7] = high >>> 16;
    tail[end - 6] = high >>> 8; tail[end - 5] = high;
    tail[end - 4] = low >>> 24; tail[end - 3] = low >>> 16;
    tail[end - 2] = low >>> 8; tail[end - 1] = low;
    for (let o = 0; o < end; o += 64) block(tail, o);
    return Array.from(H, (x) => (x >>> 0).toString(16).padStart(8, "0"))
      .join("");
  }
