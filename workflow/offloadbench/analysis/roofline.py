"""The roofline model on the tidy tables: each device's measured roofs, and for each cell
the roof that bounds it and how close it comes.

A roof is the best rate any library reached on the device (the machine can do at least
that much), so a cell is measured against the device, not against its own library.
Results from before the roofs were measured have no roofs table: every function then
returns no bounds rather than failing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ROOF_COLUMNS = ["device", "device_name", "kind", "dtype", "library", "value", "ci_low", "ci_high", "unit"]
BOUND_COLUMNS = ["memory_gbs", "compute_gflops", "ridge", "bound", "attainable_gflops", "roof_fraction"]


def _no_roofs(roofs: pd.DataFrame | None) -> bool:
    return roofs is None or roofs.empty or not {"device", "kind", "status", "value"} <= set(roofs.columns)


def device_roofs(roofs: pd.DataFrame | None) -> pd.DataFrame:
    """One row per roof: each device's memory roof (GB/s) and its compute roof per dtype
    (GFLOP/s), the best over libraries among the ok measurements."""
    if _no_roofs(roofs):
        return pd.DataFrame(columns=ROOF_COLUMNS)
    ok = roofs[(roofs["status"] == "ok") & roofs["value"].notna() & (roofs["value"] > 0)
               & roofs["kind"].isin(["memory", "compute"])]
    if ok.empty:
        return pd.DataFrame(columns=ROOF_COLUMNS)
    # The memory roof counts bytes, so the dtype its triad ran in does not split it.
    keys = ok["kind"].map({"memory": ""}).fillna(ok["dtype"])
    best = ok.loc[ok.assign(_key=keys).groupby(["device", "kind", "_key"])["value"].idxmax()]
    return best.reindex(columns=ROOF_COLUMNS).sort_values(["device", "kind", "dtype"]).reset_index(drop=True)


def page_cost_s(roofs: pd.DataFrame | None) -> float:
    """What one fresh page (a minor page fault) costs on the cpu, in seconds (NaN: not measured)."""
    if _no_roofs(roofs):
        return float("nan")
    pages = roofs[(roofs["kind"] == "pages") & (roofs["device"] == "cpu") & (roofs["status"] == "ok")]["value"]
    return float(pages.iloc[0]) * 1e-9 if len(pages) and pages.iloc[0] > 0 else float("nan")


def attainable(intensity, memory_gbs, compute_gflops):
    """The roofline: GFLOP/s a kernel of this intensity (FLOP/byte) can reach at most."""
    result = np.minimum(compute_gflops, np.multiply(intensity, memory_gbs))
    return float(result) if np.ndim(result) == 0 else result


def bounds(timings: pd.DataFrame, roofs: pd.DataFrame | None) -> pd.DataFrame:
    """The ok timing rows with, for each, its roofs, the ridge point (FLOP/byte), the bound
    ("memory" below the ridge, "compute" at or above it), the attainable GFLOP/s and the
    fraction of it achieved. NaN where the device lacks a roof for the cell's dtype."""
    if "status" not in timings:  # a machine with no cells at all
        return pd.DataFrame(columns=[*timings.columns, *BOUND_COLUMNS])
    ok = timings[timings["status"] == "ok"]
    best = device_roofs(roofs)
    compute = best[best["kind"] == "compute"].set_index(["device", "dtype"])["value"].astype(float)
    memory = best[best["kind"] == "memory"].set_index("device")["value"].astype(float)
    out = ok.copy()
    out["memory_gbs"] = ok["device"].map(memory).astype(float)
    keys = pd.MultiIndex.from_arrays([ok["device"].astype(str), ok["dtype"].astype(str)])
    out["compute_gflops"] = compute.reindex(keys).to_numpy(dtype=float) if len(ok) else np.array([], dtype=float)
    out["ridge"] = out["compute_gflops"] / out["memory_gbs"]
    intensity = ok["intensity"].astype(float)
    known = out["ridge"].notna() & intensity.notna()
    out["bound"] = pd.Series(np.where(intensity < out["ridge"], "memory", "compute"), index=ok.index,
                             dtype=object).where(known)
    out["attainable_gflops"] = attainable(intensity, out["memory_gbs"], out["compute_gflops"]).where(known)
    out["roof_fraction"] = ok["gflops"].astype(float) / out["attainable_gflops"]
    return out

