"""MXFP4 (OCP MX v1.0) encode/decode: edge cases and property tests."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cookbook import mxfp4
from cookbook.mxfp4 import BLOCK, E2M1_VALUES, MXFP4Error, dequantize, e8m0_to_float, quantize, unpack_e2m1


def block(*head, fill=0.0):
    """A [1, 32] float32 block starting with `head`, the rest `fill`."""
    x = np.full((1, BLOCK), fill, dtype=np.float32)
    x[0, : len(head)] = head
    return x


def codes_of(x, **kw):
    packed, scales = quantize(x, **kw)
    return unpack_e2m1(packed), scales


def test_table_is_ocp_e2m1():
    assert E2M1_VALUES.dtype == np.float32 and E2M1_VALUES.shape == (16,)
    assert list(E2M1_VALUES[:8]) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert list(E2M1_VALUES[8:]) == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert np.signbit(E2M1_VALUES[8])


def test_zero_block_gets_scale_byte_0_and_code_0():
    codes, scales = codes_of(np.zeros((2, 64), np.float32))
    assert scales.tolist() == [[0, 0], [0, 0]]
    assert not codes.any()
    assert not dequantize(*quantize(np.zeros((2, 64), np.float32))).any()


def test_scale_is_floor_log2_amax_minus_2():
    for amax, want in [(1.0, 125), (6.0, 127), (4.0, 127), (7.99, 127), (8.0, 128), (0.75, 124)]:
        _, scales = quantize(block(amax))
        assert scales[0, 0] == want, amax


def test_subnormal_half_encodes_as_code_1():
    # amax 4 -> scale 2**0; 0.5 is the E2M1 subnormal (exp field 0, mantissa 1)
    codes, scales = codes_of(block(4.0, 0.5, -0.5))
    assert scales[0, 0] == 127
    assert codes[0, :3].tolist() == [6, 1, 9]
    assert dequantize(*quantize(block(4.0, 0.5)))[0, 1] == 0.5


def test_saturation_at_six():
    # amax 7.5: floor(log2)=2 -> scale 1, 7.5 does not fit and saturates to 6
    codes, scales = codes_of(block(7.5, -7.9))
    assert scales[0, 0] == 127
    assert codes[0, :2].tolist() == [7, 15]
    out = dequantize(*quantize(block(7.5, -7.9)))
    assert out[0, 0] == 6.0 and out[0, 1] == -6.0


@pytest.mark.parametrize(
    "value,expect",
    [
        (0.25, 0.0),
        (0.75, 1.0),
        (1.25, 1.0),
        (1.75, 2.0),
        (2.5, 2.0),
        (3.5, 4.0),
        (5.0, 4.0),
        (-0.25, -0.0),
        (-1.75, -2.0),
        (-5.0, -4.0),
        (0.2500001, 0.5),
        (4.9999, 4.0),
        (5.0001, 6.0),
    ],
)
def test_ties_round_half_to_even(value, expect):
    out = dequantize(*quantize(block(4.0, value)))  # scale 2**0
    assert out[0, 1] == expect
    assert np.signbit(out[0, 1]) == np.signbit(expect)


def test_packing_puts_even_element_in_low_nibble():
    packed, _ = quantize(block(4.0, 0.5, 1.0, 6.0))  # codes 6, 1, 2, 7 -> amax 6, scale 127
    assert packed[0, 0] == (6 | 1 << 4)
    assert packed[0, 1] == (2 | 7 << 4)


def test_e8m0_limits():
    s = np.array([0, 1, 126, 127, 128, 254, 255], np.uint8)
    f = e8m0_to_float(s)
    assert f[0] == np.float32(2.0**-127) and f[0] > 0  # a float32 subnormal, not flushed
    assert f[1] == np.float32(2.0**-126)
    assert f[2:5].tolist() == [0.5, 1.0, 2.0]
    assert f[5] == np.float32(2.0**127)
    assert np.isnan(f[6])


def test_scale_nan_byte_decodes_whole_block_to_nan():
    packed = np.zeros((1, 16), np.uint8)
    out = dequantize(packed, np.array([[255]], np.uint8))
    assert np.isnan(out).all()


def test_scale_exponent_is_clamped_at_both_ends():
    tiny = np.float32(1e-45)  # smallest float32 subnormal, log2 = -149
    _, scales = quantize(block(tiny))
    assert scales[0, 0] == 0
    huge = np.finfo(np.float32).max  # log2 just under 128 -> exponent 125
    packed, scales = quantize(block(huge))
    assert scales[0, 0] == 252
    assert dequantize(packed, scales, dtype=np.float64)[0, 0] == 6.0 * 2.0**125
    _, scales = quantize(block(huge), scale_rule="even")  # rounds up to 2**128 -> 126
    assert scales[0, 0] == 253


def test_float32_overflow_on_decode_becomes_inf():
    packed = mxfp4.pack_e2m1(np.array([[7] + [0] * 31], np.uint8))
    out = dequantize(packed, np.array([[254]], np.uint8))
    assert np.isposinf(out[0, 0])
    assert dequantize(packed, np.array([[254]], np.uint8), dtype=np.float64)[0, 0] == 6 * 2.0**127


def test_even_scale_rule_avoids_saturation():
    # amax 7 = 1.75 * 4: floor rule -> scale 1 and 7 saturates to 6; Quark "even" -> scale 2, 7 -> 8
    assert dequantize(*quantize(block(7.0)))[0, 0] == 6.0
    assert dequantize(*quantize(block(7.0), scale_rule="even"))[0, 0] == 8.0
    assert quantize(block(6.9), scale_rule="even")[1][0, 0] == 127  # below 1.75 * 4: unchanged


def test_nonfinite_raises_by_default_naming_index():
    x = np.ones((2, 64), np.float32)
    x[1, 40] = np.nan
    with pytest.raises(MXFP4Error, match=r"index \(1, 40\)"):
        quantize(x)


def test_exponent_above_127_is_refused_or_nan():
    x = np.zeros((1, 32))
    x[0, 0] = 2.0**131
    with pytest.raises(MXFP4Error, match="beyond E8M0"):
        quantize(x)
    assert quantize(x, nonfinite="nan")[1][0, 0] == 255


def test_nonfinite_nan_policy_marks_only_that_block():
    x = np.ones((1, 64), np.float32)
    x[0, 3] = np.inf
    packed, scales = quantize(x, nonfinite="nan")
    assert scales.tolist() == [[255, 125]]
    out = dequantize(packed, scales)
    assert np.isnan(out[0, :32]).all() and (out[0, 32:] == 1.0).all()


@pytest.mark.parametrize("shape", [(31,), (2, 48), ()])
def test_bad_shapes_are_refused(shape):
    with pytest.raises(MXFP4Error):
        quantize(np.zeros(shape, np.float32))


def test_bad_dtype_and_mismatched_scales_are_refused():
    with pytest.raises(MXFP4Error, match="not a float"):
        quantize(np.zeros(32, np.int32))
    with pytest.raises(MXFP4Error, match="do not match"):
        dequantize(np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8))


def test_shapes_and_float16_input():
    x = np.random.default_rng(0).standard_normal((3, 4, 128)).astype(np.float16)
    packed, scales = quantize(x)
    assert packed.shape == (3, 4, 64) and packed.dtype == np.uint8
    assert scales.shape == (3, 4, 4) and scales.dtype == np.uint8
    assert dequantize(packed, scales, dtype=np.float16).shape == (3, 4, 128)


def test_gguf_nibble_order():
    codes = np.arange(32, dtype=np.uint8) % 16
    g = mxfp4.to_gguf_nibbles(mxfp4.pack_e2m1(codes[None]))[0]
    assert [g[j] & 0xF for j in range(16)] == codes[:16].tolist()
    assert [g[j] >> 4 for j in range(16)] == codes[16:].tolist()


def test_bf16_bits_round_to_nearest_even():
    x = np.array([1.0, -2.5, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, np.nan, 2.0**-133], np.float32)
    b = mxfp4.float32_to_bf16_bits(x)
    back = mxfp4.bf16_bits_to_float32(b)
    assert back[:2].tolist() == [1.0, -2.5]
    assert back[2] == 1.0  # tie -> even (mantissa 0)
    assert back[3] == 1.0 + 2.0**-6  # tie -> even (rounds up)
    assert np.isnan(back[4])
    assert back[5] == np.float32(2.0**-133)  # smallest bf16 subnormal survives


# ---------- property tests ----------


def reference_block(vals):
    """Independent scalar implementation of the OCP rule, for one block of Python floats."""
    amax = max(abs(v) for v in vals)
    exp = -127 if amax == 0 else max(-127, min(127, math.frexp(amax)[1] - 1 - 2))
    codes = []
    for v in vals:
        m = abs(v) / 2.0**exp
        mags = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
        dist = [abs(m - g) for g in mags]
        best = min(dist)
        cand = [i for i, d in enumerate(dist) if d == best]
        c = cand[0] if len(cand) == 1 else next(i for i in cand if i % 2 == 0)
        codes.append(c | (8 if math.copysign(1, v) < 0 else 0))
    return exp + 127, codes


finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=True)


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float32, (2, BLOCK), elements=finite_f32))
def test_quantize_matches_scalar_reference(x):
    codes, scales = codes_of(x)
    for r in range(2):
        want_scale, want_codes = reference_block([float(v) for v in x[r]])
        assert scales[r, 0] == want_scale
        assert codes[r].tolist() == want_codes


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float32, (3, 2 * BLOCK), elements=finite_f32))
def test_error_bound(x):
    packed, scales = quantize(x)
    y = dequantize(packed, scales, dtype=np.float64)
    xb = x.astype(np.float64).reshape(-1, BLOCK)
    err = np.abs(y.reshape(-1, BLOCK) - xb)
    amax = np.abs(xb).max(axis=1, keepdims=True)
    unit = np.ldexp(1.0, scales.reshape(-1, 1).astype(np.int32) - 127)
    # the scale is at most amax/4 unless clamped at 2**-127 ...
    assert ((unit <= amax / 4) | (scales.reshape(-1, 1) == 0)).all()
    # ... the error never exceeds 2 units (amax < 8 * unit saturates to 6 * unit) ...
    assert (err <= 2 * unit).all()
    # ... and inside the range, at most half the spacing (1 * unit between 4 and 6)
    inside = np.abs(xb) <= 6 * unit
    assert (err[inside] <= unit.repeat(BLOCK, 1)[inside]).all()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 15), min_size=BLOCK * 2, max_size=BLOCK * 2),
    st.lists(st.integers(0, 254), min_size=2, max_size=2),
)
def test_representable_values_round_trip_exactly(codes, scale_bytes):
    codes = np.array(codes, np.uint8).reshape(1, -1)
    codes[0, 0] = 7  # a code of magnitude 6 in each block fixes the scale
    codes[0, BLOCK] = 15
    packed = mxfp4.pack_e2m1(codes)
    scales = np.array([scale_bytes], np.uint8)
    x = dequantize(packed, scales, dtype=np.float64)
    p2, s2 = quantize(x)
    assert np.array_equal(s2, scales)
    assert np.array_equal(p2, packed)
    np.testing.assert_array_equal(dequantize(p2, s2, dtype=np.float64), x)
