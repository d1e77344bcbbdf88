"""The GRPO settings a TRL training script writes in its code, read without running it.

Most TRL users do not pass flags: their ``train_grpo.py`` builds ``GRPOConfig(per_device_train_batch_size=8, ...)``
and ``GRPOTrainer(model="Qwen/...", peft_config=LoraConfig(r=16, ...))`` and is started with a bare
``accelerate launch train_grpo.py``. This module reads those calls with Python's ``ast`` and turns every keyword
whose value is a literal (or a module-level name bound to one) into the flag TRL's CLI would take for it, so the
rest of the guard sees one launch. Values computed at run time are not guessed: they are listed as not read.

Pure: the script's text in, flags and notes out. Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field

# LoraConfig keywords -> TRL ModelConfig flags (trl/trainer/model_config.py)
LORA_FLAGS = {
    'r': 'lora_r',
    'lora_alpha': 'lora_alpha',
    'lora_dropout': 'lora_dropout',
    'target_modules': 'lora_target_modules',
}
_UNREAD = object()


@dataclass
class ScriptSettings:
    flags: list[str] = field(default_factory=list)
    """The settings as TRL flags (``--per_device_train_batch_size 8``), to go before the command line's own."""
    read: list[str] = field(default_factory=list)
    """What was read, each as ``name (line N)``."""
    unread: list[str] = field(default_factory=list)
    """Keywords whose value is computed at run time, each as ``name (line N)``."""
    lines: dict = field(default_factory=dict)
    """TRL flag name -> the line where the script sets it (read or not), to point a fix at."""
    config_line: int | None = None
    """Line of the script's ``GRPOConfig(`` call (where a setting it lacks would be added)."""
    adapter: str | None = None
    """``PeftModel.from_pretrained(base, "path")``: the adapter's path as written (its adapter_config.json holds the
    LoraConfig; read by frontends/trl/script_launch.py where it exists)."""
    from_cli: dict = field(default_factory=dict)
    """TRL flag name -> the script's own argparse attribute its value comes from (``'args.batch_size'``)."""

    def note(self, script: str) -> str | None:
        if not self.read and not self.unread:
            return None
        text = f'settings written in {script}: {", ".join(self.read) or "none readable"}'
        if self.unread:
            text += f'; not read (computed when the script runs): {", ".join(self.unread)}'
        return text


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = value`` bindings (the last one wins, as at import time)."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _once_assigned(tree: ast.Module) -> dict[str, ast.expr]:
    """``name = value`` bound exactly once anywhere in the script (a ``main()``'s ``model_name = cfg['model']``): one
    binding, so the value a later use sees whatever the scope."""
    seen: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for t in ast.walk(node) if isinstance(node, (ast.For, ast.With, ast.AugAssign, ast.AnnAssign)) else []:
            if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                seen.setdefault(t.id, []).append(t)  # loop, with and augmented targets: not one value
        for t in targets:
            if isinstance(t, ast.Name):
                seen.setdefault(t.id, []).append(node.value if len(targets) == 1 else t)
            else:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        seen.setdefault(n.id, []).append(n)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and not isinstance(v[0], ast.Name)}


ENVIRON = '\x00environ'
"""The key of ``bound`` holding the environment the training process starts with (the launch's, with what its
script exports): ``os.environ.get("LR", "2e-4")`` reads it."""
CASTS = {'int': int, 'float': float, 'str': str, 'bool': bool}


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    return (isinstance(node, ast.Attribute) and node.attr == 'environ' and _name(node.value) == 'os') or (
        isinstance(node, ast.Name) and node.id == 'environ'
    )


def _environ_value(node: ast.expr, names: dict, depth: int, bound: dict | None):
    """``os.environ.get(K, D)``, ``os.getenv(K, D)``, ``os.environ[K]`` -> the variable's value in the training
    process's environment, else the default (None without one, as Python gives); _UNREAD when not such a read, or
    when the variable is not known and there is no default."""
    env = (bound or {}).get(ENVIRON)
    if env is None:
        return _UNREAD
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        key = _value(node.slice, names, depth + 1, bound)
        return _known(env.get(key, _UNREAD)) if isinstance(key, str) else _UNREAD
    if not (isinstance(node, ast.Call) and node.args):
        return _UNREAD
    f = node.func
    is_get = isinstance(f, ast.Attribute) and f.attr == 'get' and _is_environ(f.value)
    is_getenv = (isinstance(f, ast.Attribute) and f.attr == 'getenv' and _name(f.value) == 'os') or (
        isinstance(f, ast.Name) and f.id == 'getenv'
    )
    if not (is_get or is_getenv):
        return _UNREAD
    key = _value(node.args[0], names, depth + 1, bound)
    if not isinstance(key, str):
        return _UNREAD
    if key in env:
        return _known(env[key])
    return _value(node.args[1], names, depth + 1, bound) if len(node.args) > 1 else None


def _known(value):
    """An environment value the script reader could not resolve (``$(scontrol ...)``, ``${NODES[-1]}``) is not known
    here: _UNREAD, never its text."""
    return _UNREAD if isinstance(value, str) and '$' in value else value


def _value(node: ast.expr, names: dict[str, ast.expr], depth: int = 0, bound: dict | None = None):
    """A literal, or a name bound to one; ``torch.bfloat16`` -> 'bfloat16'; ``args.lr`` where ``args`` is the script's
    parsed argparse namespace or one of its parser's own dataclasses -> its value (``bound``: ``'args.lr'`` ->
    value); ``cfg['grpo']['max_tokens']`` and ``cfg['model'].get('name', d)`` where ``cfg`` is a YAML file the
    script loads (``bound``: ``'cfg'`` -> the mapping); else _UNREAD."""
    if depth > 8:
        return _UNREAD
    if bound and isinstance(node, ast.Name) and node.id in bound:
        return bound[node.id]
    if bound and ENVIRON in bound and isinstance(node, (ast.Call, ast.Subscript)):
        v = _environ_value(node, names, depth, bound)
        if v is not _UNREAD:
            return v
    if isinstance(node, ast.Call) and _name(node.func) in CASTS and isinstance(node.func, ast.Name) and node.args:
        v = _value(node.args[0], names, depth + 1, bound)  # int(os.environ.get("N", "4"))
        try:
            return _UNREAD if v is _UNREAD or v is None else CASTS[node.func.id](v)
        except (TypeError, ValueError):
            return _UNREAD
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        a, b = _value(node.left, names, depth + 1, bound), _value(node.comparators[0], names, depth + 1, bound)
        if a is _UNREAD or b is _UNREAD:
            return _UNREAD
        return (a == b) if isinstance(node.ops[0], ast.Eq) else (a != b)
    if isinstance(node, ast.Subscript):
        base, key = _value(node.value, names, depth + 1, bound), _value(node.slice, names, depth + 1, bound)
        if isinstance(base, (dict, list)) and isinstance(key, (str, int)):
            try:
                return base[key]
            except (KeyError, IndexError, TypeError):
                return _UNREAD
        return _UNREAD
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'get' and node.args:
        base, key = _value(node.func.value, names, depth + 1, bound), _value(node.args[0], names, depth + 1, bound)
        if isinstance(base, dict) and isinstance(key, str):
            if key in base:
                return base[key]
            return _value(node.args[1], names, depth + 1, bound) if len(node.args) > 1 else None
        return _UNREAD
    if (
        bound
        and isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and f'{node.value.id}.{node.attr}' in bound
    ):
        v = bound[f'{node.value.id}.{node.attr}']
        return _UNREAD if v is None else v
    if isinstance(node, ast.Name) and node.id in names and depth < 5:
        return _value(names[node.id], names, depth + 1, bound)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'torch':
        return node.attr
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNREAD


# methods that hand back the model they are called on, moved or cast (``from_pretrained(...).to(device)``)
SAME_MODEL = ('to', 'cuda', 'half', 'bfloat16', 'float', 'train', 'eval', 'requires_grad_')


def _call(node: ast.expr | None, names: dict[str, ast.expr], depth: int = 0) -> ast.Call | None:
    """The call a keyword's value is, directly or through a module-level name, seen through ``.to(device)`` and
    the other methods that return the same model (``SAME_MODEL``)."""
    if isinstance(node, ast.Name) and node.id in names and depth < 5:
        return _call(names[node.id], names, depth + 1)
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SAME_MODEL
        and isinstance(node.func.value, ast.Call)
    ):
        node = node.func.value
    return node if isinstance(node, ast.Call) else None


def _assigned_before(tree: ast.Module, name: str, line: int) -> ast.expr | None:
    """The value last bound to ``name`` (anywhere in the script: open-r1 binds inside ``main``) before ``line``."""
    best = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and node.lineno < line
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ):
            if best is None or node.lineno > best.lineno:
                best = node
    return best.value if best is not None else None


PEFT_WRAPPERS = ('get_peft_model', 'from_pretrained')


def _peft_model(model: ast.expr, tree: ast.Module, names: dict[str, ast.expr]):
    """``model`` built with PEFT: ``get_peft_model(base, LoraConfig(...))`` or ``PeftModel.from_pretrained(base,
    adapter)``, directly or through names bound earlier. GRPOTrainer takes such a model as it is (trl/trainer/
    grpo_trainer.py ``__init__``: ``is_peft_model(model)``; only a plain model is wrapped with ``peft_config``), so it
    trains LoRA adapters on a frozen base. -> (the PEFT call, the base model expression, the LoraConfig call or None);
    None when the model is not a PeftModel."""
    node, seen = model, 0
    while isinstance(node, ast.Name) and seen < 8:
        nxt = _assigned_before(tree, node.id, getattr(node, 'lineno', 10**9) if seen else _use_line(model, tree))
        if nxt is None:
            return None
        node, seen = nxt, seen + 1
    if not isinstance(node, ast.Call):
        return None
    kind = _name(node.func)
    is_peft_loader = (
        kind == 'from_pretrained'
        and isinstance(node.func, ast.Attribute)
        and _name(node.func.value) in ('PeftModel', 'PeftModelForCausalLM', 'AutoPeftModelForCausalLM')
    )
    if kind != 'get_peft_model' and not is_peft_loader:
        return None
    kws = {k.arg: k.value for k in node.keywords if k.arg}
    base = node.args[0] if node.args else kws.get('model')
    if base is not None and isinstance(base, ast.Name):
        base = _assigned_before(tree, base.id, node.lineno) or base
    lora = None
    if kind == 'get_peft_model':
        cfg = node.args[1] if len(node.args) > 1 else kws.get('peft_config')
        if isinstance(cfg, ast.Name):
            cfg = _assigned_before(tree, cfg.id, node.lineno) or names.get(cfg.id)
        lora = cfg if isinstance(cfg, ast.Call) and _name(cfg.func) == 'LoraConfig' else None
    return node, base, lora


def _use_line(expr: ast.expr, tree: ast.Module) -> int:
    return getattr(expr, 'lineno', 10**9)


def _calls(tree: ast.Module, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == name]


def _as_flag(key: str, value) -> list[str]:
    if isinstance(value, bool):
        return [f'--{key}', 'true' if value else 'false']
    if isinstance(value, (list, tuple)):
        return [f'--{key}', *[str(v) for v in value]]
    if isinstance(value, dict):
        return [f'--{key}', json.dumps(value)]
    return [f'--{key}', str(value)]


def read_script_settings(text: str, bound: dict | None = None) -> ScriptSettings:
    """The keywords of the script's ``GRPOConfig(...)``, its ``GRPOTrainer(model=..., peft_config=...)`` and the
    ``LoraConfig``/``from_pretrained`` calls those name, as TRL flags. A script that builds its config with
    TrlParser has no such call and gives no settings (its flags are on the command line). ``bound``: the values of
    the script's own argparse namespace (``{'args.lr': 1e-5}``, frontends/trl/script_parsers.py), for keywords
    such as ``learning_rate=args.lr``."""
    out = ScriptSettings()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    names = {**_once_assigned(tree), **_constants(tree)}

    def take(call: ast.Call, keys: dict[str, str] | None = None, skip: tuple[str, ...] = (), of: str = '') -> None:
        for kw in call.keywords:
            if kw.arg is None or kw.arg in skip or (keys is not None and kw.arg not in keys):
                continue
            flag = keys[kw.arg] if keys is not None else kw.arg
            v = _value(kw.value, names, bound=bound)
            where = f'{of}{kw.arg} (line {kw.value.lineno})'
            if bound and isinstance(kw.value, ast.Attribute) and isinstance(kw.value.value, ast.Name):
                attr = f'{kw.value.value.id}.{kw.value.attr}'
                if attr in bound:
                    out.from_cli[flag] = attr
            out.lines.setdefault(flag, kw.value.lineno)
            if v is _UNREAD:
                out.unread.append(where)
                continue
            if flag == 'model_init_kwargs' and isinstance(v, dict):
                dtype = v.get('dtype', v.get('torch_dtype'))
                if dtype is not None:
                    out.flags += ['--dtype', str(dtype)]
                    out.read.append(where)
                continue
            out.flags += _as_flag(flag, v)
            out.read.append(where)

    configs = _calls(tree, 'GRPOConfig')
    if configs:
        out.config_line = configs[0].lineno
        take(configs[0], skip=('output_dir', 'report_to', 'run_name', 'logging_dir'))
    trainers = _calls(tree, 'GRPOTrainer')
    if trainers:
        trainer = trainers[0]
        kws = {kw.arg: kw.value for kw in trainer.keywords if kw.arg}
        model = kws.get('model', trainer.args[0] if trainer.args else None)
        wrapped = _peft_model(model, tree, names) if model is not None else None
        if wrapped is not None:  # a PeftModel passed as the model: TRL trains it as it is (LoRA)
            peft_call, model, lora = wrapped
            kind = _name(peft_call.func)
            if isinstance(peft_call.func, ast.Attribute) and kind == 'from_pretrained':
                kind = f'{_name(peft_call.func.value)}.from_pretrained'
            out.flags += ['--use_peft', 'true']
            out.read.append(f'model (line {peft_call.lineno}: {kind}, a PeftModel GRPOTrainer trains as it is)')
            if lora is not None:
                take(lora, LORA_FLAGS, of='LoraConfig ')
            elif kind.endswith('from_pretrained'):
                where = (
                    peft_call.args[1]
                    if len(peft_call.args) > 1
                    else next((k.value for k in peft_call.keywords if k.arg == 'model_id'), None)
                )
                path = _value(where, names, bound=bound) if where is not None else _UNREAD
                out.adapter = path if isinstance(path, str) else None
                out.unread.append(
                    f"the adapter's LoraConfig (line {peft_call.lineno}: PeftModel.from_pretrained "
                    f"reads it from the adapter; PEFT's defaults planned)"
                )
        if model is not None:
            v = _value(model, names, bound=bound)
            loader = _call(model, names)
            if isinstance(v, str):
                out.flags += ['--model_name_or_path', v]
                out.read.append(f'model (line {model.lineno})')
            elif loader is not None and _name(loader.func) == 'from_pretrained' and loader.args:
                mid = _value(loader.args[0], names, bound=bound)
                if isinstance(mid, str):
                    out.flags += ['--model_name_or_path', mid]
                    out.read.append(f'model (line {loader.lineno})')
                take(loader, {'torch_dtype': 'dtype', 'dtype': 'dtype'}, of='from_pretrained ')
            else:
                out.unread.append(f'model (line {model.lineno})')
        peft = kws.get('peft_config')
        from .peft import peft_from_command_line

        if wrapped is not None:
            pass  # TRL refuses a PeftModel with a peft_config ("Please first merge and unload the existing adapter")
        elif peft is not None and peft_from_command_line(peft, tree):
            out.read.append(f'peft_config (line {peft.lineno}: get_peft_config, LoRA only with --use_peft)')
        elif peft is not None and not (isinstance(peft, ast.Constant) and peft.value is None):
            out.flags += ['--use_peft', 'true']
            out.read.append(f'peft_config (line {peft.lineno})')
            lora = _call(peft, names)
            if lora is not None and _name(lora.func) == 'LoraConfig':
                take(lora, LORA_FLAGS, of='LoraConfig ')
    return out
