"""A host-only call's CPU time by op family, and what KS104 then tries first on the CPU."""

from __future__ import annotations

from kernelscope.analysis.cpu_families import cpu_families, cpu_tries, family_of
from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.ops import OpStat
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.findings import Code

from support.sidecars import cpu_sidecar
from support.traces import CPU_ONLY, dumps


def _op(name: str, self_cpu: float) -> OpStat:
    return OpStat(name, 1, self_cpu, self_cpu, 0.0, 0.0)


def test_families_by_name() -> None:
    assert family_of("aten::convolution_backward") == "convolutions"
    assert family_of("aten::mkldnn_convolution") == "convolutions"
    assert family_of("aten::conv2d") == "convolutions"
    assert family_of("aten::addmm") == "matmuls"
    assert family_of("aten::native_batch_norm_backward") == "normalization"
    assert family_of("Optimizer.step#SGD.step") == "the optimizer"
    assert family_of("aten::_foreach_add_") == "the optimizer"
    assert family_of("aten::max_pool2d_with_indices") == "pooling"
    assert family_of("aten::mkldnn_rnn_layer_backward") == "recurrent layers"
    assert family_of("aten::lstm") == "recurrent layers"
    assert family_of("aten::gru") == "recurrent layers"
    assert family_of("aten::_cudnn_rnn_backward") == "recurrent layers"
    assert family_of("aten::relu_") == "other ops"
    assert family_of("aten::copy_") == "other ops"


def test_shares_largest_first_small_ones_lumped() -> None:
    # timm's ResNet-18 step on the CPU: ~60 % in convolutions and their backward
    ops = [_op("aten::convolution_backward", 2310.0), _op("aten::mkldnn_convolution", 1140.0),
           _op("aten::native_batch_norm", 600.0), _op("aten::addmm", 100.0),
           _op("Optimizer.step#SGD.step", 250.0), _op("aten::relu_", 1350.0)]  # fmt: skip
    families = cpu_families(ops)
    assert [f for f, _ in families] == ["convolutions", "normalization", "other ops"]
    assert dict(families)["convolutions"] == 3450.0 / 5750.0
    assert abs(sum(s for _, s in families) - 1.0) < 1e-9
    tries = cpu_tries(families, 2)
    assert tries[0].startswith("convolutions: channels_last")
    assert tries[1].startswith("bf16 autocast on the CPU")
    assert tries[-1].startswith("torch runs 2 intra-op threads here")
    assert cpu_families([]) == []


def test_an_lstm_language_model_is_named_by_its_recurrent_layers() -> None:
    """pytorch/examples' word_language_model (2-layer LSTM, wikitext-2) on the CPU: its ten
    heaviest ops' self CPU over 5 active iterations of its in-place loop, ms
    (docs/tries/word_language_model_2026-12-06.md): its vocabulary's projection outweighs
    the LSTM."""
    ops = [_op("aten::mm", 147.3), _op("aten::addmm", 64.5),
           _op("aten::_log_softmax_backward_data", 63.7), _op("aten::_log_softmax", 60.0),
           _op("aten::fill_", 55.4), _op("aten::copy_", 43.1),
           _op("aten::mkldnn_rnn_layer_backward", 38.3), _op("aten::mkldnn_rnn_layer", 17.6),
           _op("aten::bernoulli_", 14.1), _op("aten::add_", 9.1)]  # fmt: skip
    families = dict(cpu_families(ops))
    assert list(families) == ["matmuls", "recurrent layers", "other ops"]
    assert abs(families["recurrent layers"] - 55.9 / 513.1) < 1e-9
    tries = cpu_tries(list(families.items()), 2)
    assert tries[0].startswith("bf16 autocast on the CPU")


def test_ks104_names_the_families_and_the_cpus_tries() -> None:
    # CPU_ONLY: aten::mm 60 µs and aten::add 20 µs a step: matmuls 75 %, other ops 25 %
    side = cpu_sidecar(us_per_call=40.0)
    side.device_properties = {"threads": 4}
    found = analyze(decode_trace(dumps(CPU_ONLY)), side).findings
    (host,) = [f for f in found if f.code == Code.HOST_ONLY]
    assert host.message == (
        "host-bound: no GPU work; 40.0 µs per step unprofiled (85.0 µs of CPU profiled); "
        "the ops' CPU time: matmuls 75%, other ops 25%"
    )
    assert host.try_[0].startswith("bf16 autocast on the CPU")
    assert host.try_[-1].startswith("torch runs 4 intra-op threads here")
    assert host.evidence["cpu_share_matmuls"] == 0.75
