// Shared by the fragment (tensor-core) attention kernels, attention/fragment_*.comp: the tile
// shapes, the staging of rows as fp16, and the three shapes of product they run.
// Included after common/storage.glsl, attention/common.glsl (D, TILE, the push constants) and
// common/fragment.glsl; the kernel declares WARPS and SG first (TILE = WARPS·SG).
//
// A workgroup owns R = 16·WARPS rows of one (batch, head) and warp w its rows 16w .. 16w+15;
// the other side's tiles (keys for the forward and dQ, queries for dK/dV) are R rows too,
// staged in Xs and Ys as fp16, D halves per row plus 8 of padding (every fragment starts on
// 16 bytes, and the padded rows fall in different banks). A warp's 16 x R fp32 block of Ss
// holds its scores; the row-wise work (max, exp, the score gradients) reads it one row per
// lane, so no code here assumes where a fragment's elements are.

const uint R = 16 * WARPS;  // rows of a tile
const uint ND = D / 16;     // fragments across a head
const uint LD = D + 8;      // halves per staged row
const uint LS = R + 8;      // halves per row of a warp's fp16 block (P or dS)

shared uvec2 Xs[R * LD / 4];
shared uvec2 Ys[R * LD / 4];
shared float Ss[WARPS * 16 * R];
shared float rowf[WARPS * 16];  // a factor per row of each warp (the epilogue's, and more)

// Four floats as four packed halves (exact for values that are already fp16; others are
// rounded as the device converts to fp16, as the Coopmat matmul's operands are).
uvec2 packQuad(vec4 x) {
  return uvec2(packHalf2x16(x.xy), packHalf2x16(x.zw));
}
// x as the fp16 that packQuad stores.
vec4 roundQuad(vec4 x) {
  const uvec2 u = packQuad(x);
  return vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
}

// DST = rows t0 .. t0+R-1 of tensor NAME (slot SLOT, T rows; batch B_, head H_) as fp16; rows
// past T are zero, so a padded key's value row adds 0·0 and never a NaN.
#define STAGE(DST, NAME, SLOT, T, t0, B_, H_)                                              \
  for (uint st_e = gl_LocalInvocationIndex; st_e < R * D / 4; st_e += TILE) {               \
    const uint st_r = st_e / (D / 4), st_c = 4 * (st_e % (D / 4)), st_t = (t0) + st_r;      \
    vec4 st_x = vec4(0.0);                                                                  \
    if (st_t < (T)) { /* the last tile may hang over T */                                   \
      const uint st_a = at(SLOT, B_, st_t, T, H_) + st_c;                                   \
      st_x = vec4(LOAD(NAME, st_a), LOAD(NAME, st_a + 1), LOAD(NAME, st_a + 2),             \
                  LOAD(NAME, st_a + 3));                                                    \
    }                                                                                       \
    DST[(st_r * LD + st_c) / 4] = packQuad(st_x);                                           \
  }

// frags[0 .. ND) = the 16 x D rows row0 .. row0+15 staged in SRC.
#define LOAD_ROWS(frags, SRC, row0)                    \
  FRAG_UNROLL for (uint lr_d = 0; lr_d < ND; ++lr_d) { \
    FRAG_LOAD_H(frags[lr_d], SRC, ((row0) * LD + lr_d * 16) / 4, LD / 4, false); \
  }

// The warp's 16 x R block of DST (floats from off, rows R apart) = A·Bᵀ: A the warp's 16 x D
// rows as fragments a[0 .. ND), B the R x D rows staged in SRC, read column-major as Bᵀ.
#define SCORES(DST, off, a, SRC)                                                   \
  FRAG_UNROLL for (uint sc_n = 0; sc_n < WARPS; ++sc_n) {                          \
    FragF sc_s = fragFillF(0.0);                                                   \
    FRAG_UNROLL for (uint sc_d = 0; sc_d < ND; ++sc_d) {                           \
      FragH sc_t;                                                                  \
      FRAG_LOAD_H(sc_t, SRC, (sc_n * 16 * LD + sc_d * 16) / 4, LD / 4, true);      \
      sc_s = fragMulAdd(a[sc_d], sc_t, sc_s);                                      \
    }                                                                              \
    FRAG_STORE_F(sc_s, DST, (off) + sc_n * 16, R, false);                          \
  }

// SCORES for two products in one loop, (DST1, a1, SRC1) then (DST2, a2, SRC2): one
// multiply-add in the code instead of two (llvmpipe's compile time grows with each copy of
// the emulated one; natively the unrolled loop folds the choices away).
#define SCORES2(DST1, a1, SRC1, DST2, a2, SRC2, off)                                   \
  FRAG_UNROLL for (uint sc_j = 0; sc_j < 2 * WARPS; ++sc_j) {                          \
    const bool sc_two = sc_j >= WARPS;                                                 \
    const uint sc_n = sc_j % WARPS;                                                    \
    FragF sc_s = fragFillF(0.0);                                                       \
    FRAG_UNROLL for (uint sc_d = 0; sc_d < ND; ++sc_d) {                               \
      FragH sc_a, sc_t;                                                                \
      const uint sc_at = (sc_n * 16 * LD + sc_d * 16) / 4;                             \
      if (sc_two) {                                                                    \
        sc_a = a2[sc_d];                                                               \
        FRAG_LOAD_H(sc_t, SRC2, sc_at, LD / 4, true);                                  \
      } else {                                                                         \
        sc_a = a1[sc_d];                                                               \
        FRAG_LOAD_H(sc_t, SRC1, sc_at, LD / 4, true);                                  \
      }                                                                                \
      sc_s = fragMulAdd(sc_a, sc_t, sc_s);                                             \
    }                                                                                  \
    if (sc_two) {                                                                      \
      FRAG_STORE_F(sc_s, DST2, (off) + sc_n * 16, R, false);                           \
    } else {                                                                           \
      FRAG_STORE_F(sc_s, DST1, (off) + sc_n * 16, R, false);                           \
    }                                                                                  \
  }

// acc[0 .. ND) += P·B: P the warp's 16 x R fp16 block of PSRC (from uvec2 poff, rows LS
// halves apart), B the R x D rows staged in SRC.
#define PRODUCT(acc, PSRC, poff, SRC)                                              \
  FRAG_UNROLL for (uint pr_k = 0; pr_k < WARPS; ++pr_k) {                          \
    FragH pr_p;                                                                    \
    FRAG_LOAD_H(pr_p, PSRC, (poff) + pr_k * 4, LS / 4, false);                     \
    FRAG_UNROLL for (uint pr_d = 0; pr_d < ND; ++pr_d) {                           \
      FragH pr_v;                                                                  \
      FRAG_LOAD_H(pr_v, SRC, (pr_k * 16 * LD + pr_d * 16) / 4, LD / 4, false);     \
      acc[pr_d] = fragMulAdd(pr_p, pr_v, acc[pr_d]);                               \
    }                                                                              \
  }

// PRODUCT for two products in one loop (one multiply-add in the code, as SCORES2):
// acc1 += P1·SRC1, then acc2 += P2·SRC2, P1 and P2 at the same offset of their arrays.
#define PRODUCT2(acc1, P1, SRC1, acc2, P2, SRC2, poff)                                 \
  FRAG_UNROLL for (uint pr_j = 0; pr_j < 2 * WARPS; ++pr_j) {                          \
    const bool pr_two = pr_j >= WARPS;                                                 \
    const uint pr_k = pr_j % WARPS;                                                    \
    FragH pr_p;                                                                        \
    if (pr_two) {                                                                      \
      FRAG_LOAD_H(pr_p, P2, (poff) + pr_k * 4, LS / 4, false);                         \
    } else {                                                                           \
      FRAG_LOAD_H(pr_p, P1, (poff) + pr_k * 4, LS / 4, false);                         \
    }                                                                                  \
    FRAG_UNROLL for (uint pr_d = 0; pr_d < ND; ++pr_d) {                               \
      FragH pr_v;                                                                      \
      FragF pr_c;                                                                      \
      const uint pr_at = (pr_k * 16 * LD + pr_d * 16) / 4;                             \
      if (pr_two) {                                                                    \
        FRAG_LOAD_H(pr_v, SRC2, pr_at, LD / 4, false);                                 \
        pr_c = acc2[pr_d];                                                             \
      } else {                                                                         \
        FRAG_LOAD_H(pr_v, SRC1, pr_at, LD / 4, false);                                 \
        pr_c = acc1[pr_d];                                                             \
      }                                                                                \
      pr_c = fragMulAdd(pr_p, pr_v, pr_c);                                             \
      if (pr_two)                                                                      \
        acc2[pr_d] = pr_c;                                                             \
      else                                                                             \
        acc1[pr_d] = pr_c;                                                             \
    }                                                                                  \
  }

// Rows t0 .. t0+15 of tensor NAME (slot SLOT, T rows) = (or += where p.accumulate) the warp's
// 16 x D accumulators acc, row r times rowf[16·warp + r]: each fragment goes through the
// warp's block of Ss so that every element can be checked against T.
#define STORE_ROWS(acc, NAME, SLOT, T, t0, B_, H_)                                         \
  FRAG_UNROLL for (uint so_d = 0; so_d < ND; ++so_d) {                                      \
    const uint so_base = fragWarp() * 16 * R;                                               \
    FRAG_STORE_F(acc[so_d], Ss, so_base, 16, false);                                        \
    /* The fragment is spread over the warp: all of it is in Ss before any lane reads. */   \
    fragWarpBarrier();                                                                      \
    for (uint so_e = fragLane(); so_e < 256; so_e += SG) {                                  \
      const uint so_t = (t0) + so_e / 16;                                                   \
      if (so_t >= (T)) continue; /* the last tile may hang over T */                        \
      const uint so_a = at(SLOT, B_, so_t, T, H_) + so_d * 16 + so_e % 16;                  \
      const float so_v = Ss[so_base + so_e] * rowf[fragWarp() * 16 + so_e / 16];            \
      STORE(NAME, so_a, p.accumulate != 0 ? LOAD(NAME, so_a) + so_v : so_v);                \
    }                                                                                       \
    /* Every lane has read its part before the next fragment overwrites the block. */       \
    fragWarpBarrier();                                                                      \
  }
