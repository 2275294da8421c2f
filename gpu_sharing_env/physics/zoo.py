"""Model zoo: one calibrated :class:`ModelProfile` per model class in ``MODEL_CLASSES``.

Where the figures come from (datasets in ``../shared/data``, see its PROVENANCE.md §2; fits by
``scripts/calibrate.py``, write-up in ``docs/calibration.md``):

- ``duty``: solo GPU utilisation measured by Lucid (``lucid/single_data.csv``, ``gpu_util``, RTX
  3090) for the nearest Lucid model; else the Gavel co-location fit; else a stated assumption.
- ``bw_intensity``: the per-family value fitted on Gavel V100 pairs (``gavel_pairs``) where Gavel
  has the family; else Lucid's measured memory-controller utilisation (``gmem_util``/100); else the
  population median of the fitted values (0.40).
- ``sm_k`` (MPS SM-share curve, large-batch limit; a service's batch of ``b`` saturates with
  ``sm_k * (1 + interference.SM_BATCH_BETA / b)``): fitted on iGniter's V100 MPS solo profile
  (``igniter_solo``) for the nearest iGniter network; else the median of the four fits (0.62).
- ``mig_k`` (MIG curve): fitted on MISO's A100 MIG iteration times (``miso_mig``); else the
  median of the eight MISO fits (1.70).
- ``batch_a_ms``/``batch_c_ms`` (V100 latency of a batch of ``b`` at 100 % SM is ``a + c*b``):
  fitted on iGniter's solo profile for the nearest network; else ``a`` = median of the four fits
  and ``c`` = ResNet-50's ``c`` scaled by forward GFLOPs (torchvision model docs, 224x224).
- ``solo_speed``: measured cross-GPU ratios where they exist (Gavel P100/V100 steps/s; Sia
  T4 (``aws``), V100 (``azure``), A100-40GB (``dgx``/``dgx-ext``) step times at the largest batch
  both clusters ran), else the roofline rule of :func:`_extrapolate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpu_sharing_env.physics.hardware import GPU_TYPES, GpuType
from gpu_sharing_env.workload.job import MODEL_CLASSES

__all__ = ["REFERENCE_GPU", "ZOO", "ModelProfile", "UnknownModelError", "get_profile"]

#: The GPU all ``work_s`` figures are expressed on.
REFERENCE_GPU = "V100-16GB"


class UnknownModelError(KeyError):
    """A model name the speed model has no profile for; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would print the repr of the message.
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the speed model knows about one model class.

    Attributes:
        name: Model class name (a key of ``MODEL_CLASSES``).
        duty: Solo SM activity (GPU utilisation) in (0, 1] while training alone.
        mem_gb: Typical training memory per GPU.
        bw_intensity: Memory-bandwidth / L2 pressure in [0, 1]; drives MPS co-location slowdown
            and the roofline extrapolation across GPU types.
        cpu_cores: Typical vCPUs per GPU.
        sm_k: Saturation of the MPS SM-share curve ``(1-e^{-k s})/(1-e^{-k})`` (0 = linear) at
            large batches (training); smaller inference batches saturate earlier
            (``interference.sm_share_k``).
        mig_k: Saturation of the MIG curve, same form in the instance's effective size.
        solo_speed: Exclusive throughput per canonical GPU type relative to V100-16GB (= 1).
        batch_a_ms: Fixed part of the V100 inference latency of one batch at 100 % SM.
        batch_c_ms: Per-sample part of that latency (latency = a + c * batch).
    """

    name: str
    duty: float
    mem_gb: float
    bw_intensity: float
    cpu_cores: float
    sm_k: float
    mig_k: float
    solo_speed: Mapping[str, float]
    batch_a_ms: float
    batch_c_ms: float

    def __post_init__(self) -> None:
        if not 0 < self.duty <= 1:
            raise ValueError(f"{self.name}: duty must be in (0, 1]")
        if not 0 <= self.bw_intensity <= 1:
            raise ValueError(f"{self.name}: bw_intensity must be in [0, 1]")
        if self.sm_k < 0 or self.mig_k < 0:
            raise ValueError(f"{self.name}: sm_k and mig_k must be >= 0")
        if self.solo_speed.get(REFERENCE_GPU) != 1.0:
            raise ValueError(f"{self.name}: solo_speed[{REFERENCE_GPU!r}] must be 1.0")


#: Population medians used where a model has no measurement (see the module docstring).
MEDIAN_BW = 0.40  # median of the 7 Gavel family bw_intensity fits (gavel_pairs)
MEDIAN_SM_K = 0.62  # median of the 4 iGniter sm_k fits (igniter_solo)
MEDIAN_MIG_K = 1.70  # median of the 8 MISO mig_k fits (miso_mig)
MEDIAN_BATCH_A_MS = 0.87  # median of the 4 iGniter batch_a fits (igniter_solo)
#: P100 where Gavel has no job of the family: median of Gavel's P100/V100 solo ratios over the
#: 26 job types (0.75, gavel_throughputs_flat.csv, scale_factor 1). The tensor-core roofline does
#: not apply to P100 (no tensor cores) so it is not used there.
MEDIAN_P100 = 0.75
#: ResNet-50 V100 per-sample latency (ms, igniter_solo fit) and its forward GFLOPs (torchvision
#: ``ResNet50_Weights.IMAGENET1K_V1``: 4.09) for the FLOPs-scaled ``batch_c_ms`` rule.
_C_PER_GFLOP = 0.744 / 4.09


def _roofline(gpu: GpuType, bw: float) -> float:
    """Time-weighted roofline throughput relative to the V100: the compute share ``1 - bw`` of a
    V100 step scales with dense FP16 tensor TFLOPS, the memory share ``bw`` with memory bandwidth
    (datasheet figures from ``hardware.GPU_TYPES``)."""
    ref = GPU_TYPES[REFERENCE_GPU]
    return 1.0 / (
        (1.0 - bw) * ref.fp16_tensor_tflops / gpu.fp16_tensor_tflops
        + bw * ref.mem_bw_gbps / gpu.mem_bw_gbps
    )


def _extrapolate(measured: Mapping[str, float], bw: float) -> Mapping[str, float]:
    """Fill every canonical GPU type: measured ratios verbatim, the others by the rule

    ``speed(X) = speed(anchor) * roofline(X, bw) / roofline(anchor, bw)`` with the anchor the
    A100-40GB if it was measured, else the V100-16GB (1.0). P100 without a measurement takes
    :data:`MEDIAN_P100`. V100-32GB is the same chip as V100-16GB and comes out at 1.0.
    """
    anchor = "A100-40GB" if "A100-40GB" in measured else REFERENCE_GPU
    base = measured.get(anchor, 1.0) / _roofline(GPU_TYPES[anchor], bw)
    out: dict[str, float] = {}
    for name, gpu in GPU_TYPES.items():
        if name in (REFERENCE_GPU, "V100-32GB"):
            out[name] = 1.0  # same GV100 chip and clocks; only capacity differs
        elif name in measured:
            out[name] = measured[name]
        elif name == "P100":
            out[name] = MEDIAN_P100
        else:
            out[name] = round(base * _roofline(gpu, bw), 3)
    return dict(out)


def _profile(
    name: str,
    *,
    duty: float,
    mem_gb: float,
    bw: float,
    cpu: float,
    sm_k: float = MEDIAN_SM_K,
    mig_k: float = MEDIAN_MIG_K,
    measured: Mapping[str, float] | None = None,
    a_ms: float = MEDIAN_BATCH_A_MS,
    c_ms: float,
) -> ModelProfile:
    return ModelProfile(
        name, duty, mem_gb, bw, cpu, sm_k, mig_k, _extrapolate(measured or {}, bw), a_ms, c_ms
    )


# Per-entry comments name the source of each figure; "L:" = lucid/single_data.csv row (model,
# dataset, batch, amp=0), "G:" = Gavel family fitted by scripts/calibrate.py on gavel_pairs,
# "I:" = iGniter network fitted on igniter_solo, "M:" = MISO model fitted on miso_mig,
# "S:" = Sia step-time ratio V100(azure)/X at the largest common batch (placement 1),
# "GP:" = Gavel P100/V100 solo steps/s, median over the family's batch sizes. mem_gb is Lucid's
# gmem (MiB/1024) where Lucid has the model, else an assumption marked "assumed".
# cpu_cores: assumption, 4 vCPUs per GPU for image pipelines (decode/augment), 2 otherwise
# (PAI: jobs typically ask for 4-8 vCPUs per GPU; a stated simplification).
_PROFILES: tuple[ModelProfile, ...] = (
    _profile(
        "resnet50",
        duty=1.0,  # L: ResNet50 ImageNet bs64 gpu_util 100.0
        mem_gb=8.4,  # L: gmem 8570 MiB (bs64)
        bw=1.0,  # G: ResNet-50
        cpu=4,
        sm_k=0.73,  # I: resnet50
        mig_k=3.52,  # M: resnet
        measured={"P100": 0.63, "T4": 0.41, "A100-40GB": 1.37},  # GP; S: imagenet bsz 163/462
        a_ms=0.92,  # I: resnet50
        c_ms=0.744,  # I: resnet50
    ),
    _profile(
        "resnet18",
        duty=0.96,  # L: ResNet18 CIFAR-10 bs128 gpu_util 96.25
        mem_gb=3.0,  # L: gmem 3072 MiB
        bw=0.11,  # G: ResNet-18
        cpu=4,
        sm_k=0.73,  # I: resnet50 (nearest measured network)
        mig_k=3.52,  # M: resnet
        measured={"P100": 0.93, "T4": 0.34, "A100-40GB": 1.96},  # GP; S: cifar10 bsz 725/1025
        c_ms=1.81 * _C_PER_GFLOP,  # torchvision resnet18: 1.81 GFLOPs
    ),
    _profile(
        "vgg16",
        duty=0.51,  # L: VGG CIFAR-10 bs128 gpu_util 50.5
        mem_gb=3.9,  # L: gmem 3990 MiB
        bw=0.34,  # L: gmem_util 34.0
        cpu=4,
        sm_k=0.25,  # I: vgg19
        a_ms=0.83,  # I: vgg19
        c_ms=1.742,  # I: vgg19
    ),
    _profile(
        "densenet201",
        duty=0.95,  # assumed: compute-bound CNN like ResNet-50
        mem_gb=10.0,  # assumed
        bw=MEDIAN_BW,
        cpu=4,
        c_ms=4.29 * _C_PER_GFLOP,  # torchvision densenet201: 4.29 GFLOPs
    ),
    _profile(
        "inceptionv3",
        duty=0.95,  # assumed: compute-bound CNN like ResNet-50
        mem_gb=8.0,  # assumed
        bw=MEDIAN_BW,
        cpu=4,
        c_ms=5.71 * _C_PER_GFLOP,  # torchvision inception_v3: 5.71 GFLOPs
    ),
    _profile(
        "mobilenet",
        duty=0.99,  # L: MobileNetV2 CIFAR-10 bs128 gpu_util 98.8
        mem_gb=4.0,  # L: gmem 4078 MiB
        bw=0.65,  # L: gmem_util 65.3
        cpu=4,
        sm_k=0.98,  # I: alexnet (small network that saturates the GPU early)
        mig_k=6.48,  # M: mobilenet
        a_ms=0.56,  # I: alexnet
        c_ms=0.155,  # I: alexnet
    ),
    _profile(
        "bert",
        duty=1.0,  # L: BERT SQuAD bs32 gpu_util 99.7
        mem_gb=19.7,  # L: gmem 20162 MiB
        bw=0.62,  # L: gmem_util 62.5
        cpu=2,
        mig_k=0.78,  # M: bert
        measured={"T4": 0.39, "A100-40GB": 2.49},  # S: bert bsz 11/12 and dgx-ext 36
        c_ms=11.0 * _C_PER_GFLOP,  # assumed: ~11 GFLOPs per 128-token BERT-base sequence
    ),
    _profile(
        "transformer",
        duty=0.75,  # L: Transformer Multi30k bs64 gpu_util 75.2
        mem_gb=11.5,  # L: gmem 11801 MiB
        bw=0.35,  # G: Transformer
        cpu=2,
        mig_k=0.53,  # M: transformer
        measured={"P100": 0.74},  # GP: Transformer
        c_ms=2.0 * _C_PER_GFLOP,  # assumed: ~2 GFLOPs per sentence pair
    ),
    _profile(
        "gpt2",
        duty=1.0,  # assumed: large transformer LM keeps the GPU busy
        mem_gb=24.0,  # assumed (GPT-2 small/medium with Adam states)
        bw=0.62,  # assumed: as bert (L: gmem_util 62.5)
        cpu=2,
        mig_k=0.53,  # M: transformer (nearest measured)
        c_ms=40.0 * _C_PER_GFLOP,  # assumed: ~40 GFLOPs per 1024-token GPT-2 small sequence
    ),
    _profile(
        "gnn",
        duty=0.6,  # assumed: sparse aggregation leaves the GPU idle between kernels
        mem_gb=4.0,  # assumed
        bw=MEDIAN_BW,
        cpu=4,
        mig_k=2.05,  # M: gnn
        c_ms=0.5 * _C_PER_GFLOP,  # assumed
    ),
    _profile(
        "deepfm",
        duty=0.74,  # G: Recommendation
        mem_gb=2.0,  # assumed: embedding tables of a CTR model
        bw=1.0,  # G: Recommendation
        cpu=4,
        mig_k=3.24,  # M: embedding
        c_ms=0.01 * _C_PER_GFLOP,  # assumed
    ),
    _profile(
        "ncf",
        duty=0.10,  # L: NeuMF MovieLens bs128 gpu_util 10.5
        mem_gb=2.0,  # L: gmem 2050 MiB
        bw=0.02,  # L: gmem_util 2.0
        cpu=2,
        mig_k=3.24,  # M: embedding (nearest measured)
        c_ms=0.01 * _C_PER_GFLOP,  # assumed
    ),
    _profile(
        "ppo",
        duty=0.13,  # L: PPO LunarLander bs64 gpu_util 11.9 .. bs128 15.0
        mem_gb=2.0,  # L: gmem 2051 MiB
        bw=0.40,  # G: A3C
        cpu=8,  # assumed: environment simulation is CPU-heavy
        measured={"P100": 0.79},  # GP: A3C
        c_ms=0.01 * _C_PER_GFLOP,  # assumed
    ),
    _profile(
        "yolov3",
        duty=0.9,  # assumed
        mem_gb=10.0,  # assumed
        bw=MEDIAN_BW,
        cpu=4,
        sm_k=0.51,  # I: ssd (nearest: single-shot detector)
        # S: yolov3 T4 at bsz 16. Sia's A100 ratios (0.84-1.0) are below 1 and were rejected as
        # input-pipeline bound; A100 uses the roofline rule.
        measured={"T4": 0.57},
        a_ms=1.01,  # I: ssd
        c_ms=2.946,  # I: ssd
    ),
    _profile(
        "deepspeech2",
        duty=0.9,  # assumed
        mem_gb=12.0,  # assumed
        bw=MEDIAN_BW,
        cpu=4,
        mig_k=1.35,  # M: deepspeech2
        # S: deepspeech2 T4 at bsz 57; Sia's A100 ratio 0.64 (< 1) rejected as input bound.
        measured={"T4": 0.43},
        c_ms=3.0 * _C_PER_GFLOP,  # assumed
    ),
    _profile(
        "cyclegan",
        duty=0.94,  # L: DCGAN LSUN bs128 gpu_util 94.0 (nearest GAN)
        mem_gb=4.0,  # assumed (MISO trains it on a 1g.5gb slice)
        bw=0.56,  # G: CycleGAN
        cpu=4,
        mig_k=0.95,  # M: cyclegan
        measured={"P100": 0.54},  # GP: CycleGAN
        c_ms=50.0 * _C_PER_GFLOP,  # assumed: ~50 GFLOPs per 256x256 image pair
    ),
    _profile(
        "lstm",
        duty=0.97,  # L: LSTM Wikitext2 bs64 gpu_util 97.0
        mem_gb=3.8,  # L: gmem 3884 MiB
        bw=0.27,  # G: LM
        cpu=2,
        measured={"P100": 0.83},  # GP: LM
        c_ms=0.5 * _C_PER_GFLOP,  # assumed
    ),
)

#: One profile per name in ``MODEL_CLASSES``.
ZOO: dict[str, ModelProfile] = {p.name: p for p in _PROFILES}
assert tuple(sorted(ZOO)) == tuple(sorted(MODEL_CLASSES)), "zoo out of step with MODEL_CLASSES"


def get_profile(name: str) -> ModelProfile:
    """The profile of ``name``.

    Raises:
        UnknownModelError: Not a model class; the message lists the known names.
    """
    try:
        return ZOO[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known: {', '.join(sorted(ZOO))}"
        ) from None
