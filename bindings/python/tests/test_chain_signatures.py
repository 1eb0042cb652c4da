"""The explicit keyword signatures of the sampling entry points agree with the one table of
chain settings (LLAMA_CPP_DEFAULTS), and Context.generate with generation_options."""

import inspect

import powerinfer
from powerinfer._generation import generation_options
from powerinfer._sampling import LLAMA_CPP_DEFAULTS


def _defaults(function: object) -> dict[str, object]:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _chain_defaults(function: object) -> dict[str, object]:
    defaults = _defaults(function)
    return {name: defaults[name] for name in LLAMA_CPP_DEFAULTS if name in defaults}


def test_every_entry_point_takes_every_chain_setting_and_its_alias() -> None:
    for function in (powerinfer.Sampler.__init__, generation_options, powerinfer.Context.generate):
        names = inspect.signature(function).parameters
        assert set(LLAMA_CPP_DEFAULTS) <= set(names), function
        assert "repeat_last_n" in names, function


def test_the_sampler_defaults_are_llama_cpps() -> None:
    # penalty_last_n's None defers to the table (or to the alias repeat_last_n).
    expected = dict(LLAMA_CPP_DEFAULTS, penalty_last_n=None)
    assert _chain_defaults(powerinfer.Sampler.__init__) == expected


def test_generate_defaults_are_llama_cpps_but_min_p_off() -> None:
    expected = dict(LLAMA_CPP_DEFAULTS, penalty_last_n=None, min_p=0.0)
    assert _chain_defaults(generation_options) == expected


def test_generate_has_the_parameters_of_generation_options() -> None:
    generate = inspect.signature(powerinfer.Context.generate).parameters
    options = inspect.signature(generation_options).parameters
    assert [n for n in generate if n not in ("self", "prompt", "on_token")] == list(options)
    for name, p in options.items():
        assert (generate[name].kind, generate[name].default) == (p.kind, p.default), name
