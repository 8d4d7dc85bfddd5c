"""Provider stubs, generated from source alone: a method's instance from its class's
constructor (a config class, get_default_config(), annotated values), in the text that goes
into kernelscope_inputs.py."""

from __future__ import annotations

from pathlib import Path

from kernelscope.engine.project import Project, load_project, provider_hint
from kernelscope.pyfunctions import find, provider_stub, stub_for

from support import WORKLOADS

MODELS = WORKLOADS / "stub_models"
MINGPT = MODELS / "mingpt_like.py"
NANOGPT = MODELS / "nanogpt_like.py"


def stub(path: Path, qualname: str) -> str:
    text = stub_for(str(path), qualname)
    assert text is not None
    compile(text, "stub", "exec")
    return text


def test_mingpt_config_comes_from_get_default_config_with_its_sizes_filled() -> None:
    text = stub(MINGPT, "CausalSelfAttention.forward")
    assert text.startswith("import torch\nfrom mingpt_like import CausalSelfAttention, GPT\n")
    body = text.split('"""\n', 2)[-1]
    assert body.splitlines() == [
        "    config = GPT.get_default_config()",
        "    config.n_layer = 2  # None by default",
        "    config.n_head = 4  # None by default",
        "    config.n_embd = 128  # None by default",
        "    config.vocab_size = 1024  # None by default",
        "    config.block_size = 64  # None by default",
        "    config.model_type = None  # the sizes above are given instead",
        "    instance = CausalSelfAttention(config)",
        "    x = torch.randn(batch_size, config.block_size, config.n_embd, device=device)",
        "    return (instance, x)",
    ]


def test_token_ids_for_a_model_that_embeds_them() -> None:
    text = stub(MINGPT, "GPT.forward")
    assert "    instance = GPT(config)\n" in text
    assert (
        "    idx = torch.randint(0, config.vocab_size, (batch_size, config.block_size), "
        "device=device)\n" in text
    )
    assert "targets" not in text  # a parameter with a default is left out
    assert "return (instance, idx)" in text


def test_nanogpt_config_dataclass_is_built_with_its_defaults() -> None:
    text = stub(NANOGPT, "MLP.forward")
    assert text == (
        "import torch\n"
        "from nanogpt_like import GPTConfig, MLP\n\n\n"
        'def MLP_forward_inputs(batch_size: int = 1, device: str = "cpu"):\n'
        '    """Inputs for kernelscope: MLP.forward(instance, x)."""\n'
        "    config = GPTConfig()\n"
        "    instance = MLP(config)\n"
        "    x = torch.randn(batch_size, config.block_size, config.n_embd, device=device)\n"
        "    return (instance, x)\n"
    )
    annotated = stub(NANOGPT, "GPT.forward")  # `config: GPTConfig`
    assert "    config = GPTConfig()\n    instance = GPT(config)\n" in annotated


def test_plain_class_gets_its_annotated_parameters_and_keeps_its_defaults() -> None:
    text = stub(NANOGPT, "Scaler.forward")
    assert "    dim = 64\n    hidden = 64\n    instance = Scaler(dim, hidden)\n" in text
    assert "scale" not in text.split("instance =")[1].split("\n")[0]  # defaults left out
    assert "    x = torch.randn(32 * batch_size, dim, device=device)\n    k = 1\n" in text


def test_a_config_nobody_defines_is_a_todo_and_nothing_is_imported_for_it() -> None:
    source = (
        "class Block:\n    def __init__(self, config):\n        pass\n\n"
        "    def forward(self, x):\n        return x\n"
    )
    fn = find(source, "Block.forward")
    assert fn is not None
    made = provider_stub(fn, source, "model")
    assert "    config = ...  # TODO: the config Block() takes\n" in made.text
    assert made.imports == ("import torch", "from model import Block")


def test_two_config_classes_are_not_guessed_between() -> None:
    source = (
        "class AConfig:\n    pass\n\nclass BConfig:\n    pass\n\n"
        "class Net:\n    def __init__(self, cfg, width: int):\n        pass\n\n"
        "    def forward(self, x):\n        return x\n"
    )
    fn = find(source, "Net.forward")
    assert fn is not None
    text = provider_stub(fn, source, "model").text
    assert "cfg = ...  # TODO" in text and "width = 64" in text
    assert "instance = Net(cfg, width)" in text


def test_a_function_keeps_todays_stub_and_its_module_text_is_a_whole_file() -> None:
    fn = find((WORKLOADS / "three_lines.py").read_text(), "needs_inputs")
    assert fn is not None
    made = provider_stub(fn, "", "three_lines")
    assert "    x = torch.randn(32 * batch_size, 1024, device=device)\n    k = 1\n" in made.text
    assert made.imports == ("import torch",)
    compile(made.module_text(), "kernelscope_inputs.py", "exec")


def test_the_hint_names_kernelscope_inputs_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    model = tmp_path / "pkg" / "model.py"
    model.write_text(NANOGPT.read_text())
    hint = provider_hint(model, "MLP.forward")
    assert hint is not None
    assert hint.startswith("# in kernelscope_inputs.py (beside model.py)\nimport torch\n")
    assert "from pkg.model import GPTConfig, MLP\n" in hint


def test_inputs_module_is_read_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kernelscope]\ninputs_module = "tools.inputs"\n')
    project = load_project(tmp_path / "model.py")
    assert project.inputs_module == "tools.inputs"
    root = tmp_path.resolve()
    assert project.inputs_file(tmp_path / "model.py") == root / "tools" / "inputs.py"
    assert project.provider_files(tmp_path / "sub" / "model.py") == [
        root / "sub" / "kernelscope_inputs.py",
        root / "kernelscope_inputs.py",
        root / "tools" / "inputs.py",
        root / "tools" / "inputs" / "__init__.py",
    ]
    assert Project(root).inputs_file(root / "model.py") == root / "kernelscope_inputs.py"
