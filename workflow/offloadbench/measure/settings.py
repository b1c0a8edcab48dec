"""How a cell is measured: what a worker takes of the run's settings file (run_settings),
as one typed object passed to everything that times."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..catalogue import MEMORY_HEADROOM
from ..run_settings import RunSettings
from . import diagnostics, disturbance, timing
from .timing import BlockRule, StopRule, WarmupRule


@dataclass(frozen=True)
class Settings:
    """Measurement settings; `from_config` reads the `measure` section of the config."""

    stop: StopRule = field(default_factory=StopRule)
    warmup: WarmupRule = field(default_factory=WarmupRule)
    block: BlockRule = field(default_factory=BlockRule)
    random_state: int = 0  # of the inputs
    check_rows: int = 32
    pinned_memory: bool = False
    allow_tf32: bool = False
    memory_headroom: float = MEMORY_HEADROOM
    compile_backend: str = "inductor"
    compile_mode: str = "default"
    cold_cache: bool = True
    resident_calls: tuple[int, ...] = (1, 16)  # the k of each resident trip (GPU cells that chain)
    turn_s: float = 0.02  # a bout's turn: each region sampled at least this long (one sample at least)

    @classmethod
    def from_run(cls, run: RunSettings) -> Settings:
        """What a cell's process takes of the run's settings file."""
        m, c = run.measure, run.compile
        return cls(
            stop=StopRule(target_rel_ci=m.target_rel_ci, min_samples=m.min_samples, min_sampling_s=m.min_sampling_s,
                          max_samples=m.max_samples, budget_s=m.budget_s),
            warmup=WarmupRule(budget_s=m.warmup_budget_s),
            block=BlockRule(min_sample_s=m.min_sample_s),
            random_state=m.random_state,
            check_rows=m.check_rows,
            pinned_memory=m.pinned_memory,
            allow_tf32=m.allow_tf32,
            compile_backend=c.backend,
            compile_mode=c.mode,
            cold_cache=c.cold_cache,
            resident_calls=m.resident_calls,
            turn_s=m.turn_s,
        )

    @classmethod
    def from_config(cls, section: dict, compile_section: dict) -> Settings:
        """From the validated config's `measure` and `compile` sections, as the settings
        file would hold them (what tests build)."""
        return cls.from_run(RunSettings.from_sections(section, compile_section))

    def method(self) -> dict[str, float]:
        """The thresholds of the measuring method as numbers, from the rules that apply them:
        every round writes them into its record, and the report words its method from them."""
        return {
            "warmup_rel_tol": self.warmup.rel_tol,
            "warmup_budget_s": self.warmup.budget_s,
            "warmup_growing_budget_s": self.warmup.growing_budget_s,
            "heap_growth_bytes": timing.HEAP_GROWTH_BYTES,
            "min_sample_s": self.block.min_sample_s,
            "max_overhead_frac": self.block.max_overhead_frac,
            "turn_s": self.turn_s,
            "preroll_s": timing.PREROLL_S,
            "preroll_max_s": timing.PREROLL_MAX_S,
            "preroll_copy_max_s": timing.COPY_PREROLL_MAX_S,
            "min_samples": self.stop.min_samples,
            "target_rel_ci": self.stop.target_rel_ci,
            "budget_s": self.stop.budget_s,
            "disturbed_cores": disturbance.DISTURBED_CORES,
            "disturbed_pressure": disturbance.DISTURBED_PRESSURE,
            "clock_change_rel": diagnostics.CLOCK_CHANGE_REL,
            "bimodal_explained_variance": diagnostics.BIMODAL_EXPLAINED_VARIANCE,
            "check_rows": self.check_rows,
        }
