"""Writes fixtures/npy/: arrays as numpy itself saves them (np.save), one per dtype and order
gpukit reads, and numpy's own results for them, against which tests/npy.rs checks gpukit.

Run once with numpy 2.x: python3 scripts/make_npy_fixtures.py. The files are tiny.
"""
import os
import numpy as np

out = os.path.join(os.path.dirname(__file__), "..", "fixtures", "npy")
os.makedirs(out, exist_ok=True)


def save(name, a):
    np.save(os.path.join(out, name + ".npy"), a)


rng = np.random.default_rng(7)
# numpy's defaults: np.arange gives int64, np.random gives float64.
ints = np.arange(10)
save("arange_i8", ints)
save("cumsum_arange", np.concatenate([[0], np.cumsum(ints)[:-1]]).astype(np.int64))
for dt in ["int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64", "bool"]:
    v = (np.arange(7) * 3 % 5).astype(dt)
    save("v_" + dt, v)
save("v_int16_be", (np.arange(7) - 3).astype(">i2"))
save("v_int64_neg", np.array([5, -2, 7, -9], dtype=np.int64))
save("v_float16", np.array([0.5, 1.25, -2.0, 65504.0], dtype=np.float16))
save("v_float32_be", np.array([0.5, 1.25, -2.0], dtype=">f4"))
save("v_int64_big", np.array([1, 2**40], dtype=np.int64))
save("v_float64_huge", np.array([1.0, 1e300]))
save("v_float64_frac", np.array([1.0, 2.5]))

a = rng.random((4, 3))  # float64, C order
b = np.asfortranarray(rng.random((3, 5)))  # float64, Fortran order
save("a_f8", a)
save("b_f8_fortran", b)
save("b_f8_be", b.astype(">f8"))
save("ab_f8", a @ b)
save("m_int64", np.arange(6).reshape(2, 3))
save("m_int64_big", np.array([[1, 2**24 + 1]], dtype=np.int64))
