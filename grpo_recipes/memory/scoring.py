"""Scores of the memory model on a file of calibration cases (``grpo-guard calibrate``): each case predicted by
:func:`~grpo_recipes.memory.calibrate.predict` and compared like with like (torch's reserved bytes with ms-swift's
``memory(GiB)``, the device figure with nvidia-smi and OOM messages, vLLM's weights and KV cache with its log)."""

from __future__ import annotations

import statistics

from .calibrate import is_legacy, predict
from .cases import CannotPredict, _is_num, normalise
from .inputs import GiB


def _rel(pred: float, obs: float) -> float:
    return abs(pred - obs) / obs if obs else 0.0


def _observed_kv(out: dict, pred: dict) -> tuple[float | None, str]:
    """The engine's KV cache in GiB per GPU. A stated token capacity is the engine's own figure (vLLM
    takes the smallest worker's blocks; under V0 only the driver worker samples, so another worker's
    logged GiB can be larger), converted at the model's KV bytes per token per rank; otherwise the
    logged GiB."""
    tokens = out.get('kv_cache_tokens', out.get('kv_cache_capacity_tokens'))
    if tokens is not None and pred.get('kv_bytes_per_token'):
        return tokens * pred['kv_bytes_per_token'] / GiB, 'tokens'
    gib = out.get('kv_cache_gib_per_gpu', out.get('kv_cache_gib'))
    return gib, 'GiB logged'


def score(cases: list[dict], replay: bool = False) -> dict:
    rows = []
    fit_right = fit_n = 0
    peak_errs: list[float] = []
    current_errs: list[float] = []
    legacy_errs: list[float] = []
    current_point: list[float] = []  # every peak as a point at today's defaults, for comparison
    legacy_point: list[float] = []
    bounds: list[bool] = []
    ranged = 0
    w_errs: list[float] = []
    device_errs: list[float] = []
    kv_errs: list[float] = []
    sf_total = sf_pred = 0
    cannot = []
    for case in cases:
        out = case.get('outcome') or {}
        row = {'id': case['id'], 'kind': case['kind']}
        try:
            case, notes = normalise(case)
            out = case.get('outcome') or {}
            if notes:
                row['read_as'] = notes
            pred = predict(case, replay=replay)
        except CannotPredict as e:
            row['cannot_predict'] = str(e)
            cannot.append({'id': case['id'], 'missing': str(e)})
            rows.append(row)
            continue
        except Exception as e:  # noqa: BLE001 - one odd case must not stop the scoring of the others
            why = f'internal error ({type(e).__name__}: {e}); please report this case'
            row['cannot_predict'] = why
            cannot.append({'id': case['id'], 'missing': why})
            rows.append(row)
            continue
        row['predicted'] = pred
        observed_oom = bool(out.get('oom') or out.get('startup_failed'))
        observed_ok = bool(out.get('ran_ok') or (out.get('peak_gib_per_gpu') is not None and not observed_oom))
        if 'fits' in pred and (observed_oom or observed_ok):
            fit_n += 1
            right = pred['fits'] == (not observed_oom)
            fit_right += right
            row['fit'] = {
                'predicted': 'fits' if pred['fits'] else 'OOM',
                'observed': 'OOM' if observed_oom else 'fits',
                'right': right,
            }
        peak = out.get('peak_gib_per_gpu')
        if peak is not None and 'peak_gib' in pred:
            measure = str(out.get('measure', ''))
            torch_only = 'memory(GiB)' in measure
            predicted = pred['peak_torch_gib'] if torch_only else pred['peak_gib']
            point = _rel(predicted, peak)
            row['peak'] = {'predicted': predicted, 'observed': peak, 'rel_error': round(point, 3), 'measure': measure}
            if 'peak_bound' in pred:  # an upper bound is checked as one, not scored as a point
                bounds.append(peak <= predicted)
                row['peak'].update(bound=pred['peak_bound'], bound_held=peak <= predicted)
            elif 'peak_floor' in pred:  # the measurement bounds the prediction from above: checked as such
                bounds.append(predicted <= peak)
                row['peak'].update(floor=pred['peak_floor'], bound_held=predicted <= peak)
            else:
                lo, hi = pred.get('peak_torch_range_gib' if torch_only else 'peak_range_gib', (predicted, predicted))
                err = 0.0 if lo <= peak <= hi else min(abs(lo - peak), abs(hi - peak)) / peak
                if lo != hi:
                    ranged += 1
                    row['peak'].update(range=[lo, hi], range_error=round(err, 3), range_why=pred['range_why'])
                peak_errs.append(err)
                (legacy_errs if is_legacy(case) else current_errs).append(err)
                (legacy_point if is_legacy(case) else current_point).append(point)
        smi = out.get('nvidia_smi_used_mib')
        for other in ('driver_reserved_mib', 'other_processes_mib'):
            # what the figure counts beside the launch's own processes: the driver's reserved memory where it was
            # read as NVML's v1 ``used`` (nvidia-smi's basis and the card's capacity, CUDA's total, leave it out;
            # memory/reserve.py DEVICE_CONTEXT), and another process's CUDA context (a bench's own)
            if _is_num(smi) and _is_num(out.get(other)):
                smi -= out[other]
        if _is_num(smi) and 'peak_gib' in pred:  # nvidia-smi's used memory: the device figure
            err = _rel(pred['peak_gib'], smi / 1024)
            if 'peak_floor' in pred:  # as the peak: a bound, not a point
                row['device_floor_held'] = pred['peak_gib'] <= smi / 1024
            else:
                device_errs.append(err)
            row['device'] = {
                'predicted': pred['peak_gib'],
                'observed': round(smi / 1024, 2),
                'rel_error': round(err, 3),
                'signed_error': round(pred['peak_gib'] / (smi / 1024) - 1, 3),
            }
        w_obs = out.get('model_load_gib_per_gpu', out.get('model_load_gib'))
        if w_obs is not None and 'weights_gib' in pred:
            err = _rel(pred['weights_gib'], w_obs)
            w_errs.append(err)
            row['vllm_weights'] = {'predicted': pred['weights_gib'], 'observed': w_obs, 'rel_error': round(err, 3)}
        kv_obs, basis = _observed_kv(out, pred)
        if kv_obs is not None and 'kv_cache_gib' in pred:
            err = _rel(pred['kv_cache_gib'], kv_obs)
            kv_errs.append(err)
            row['vllm_kv'] = {
                'predicted': pred['kv_cache_gib'],
                'observed': round(kv_obs, 3),
                'rel_error': round(err, 3),
                'basis': basis,
            }
        if case['kind'] == 'vllm_startup' and observed_oom:
            sf_total += 1
            sf_pred += bool(pred.get('startup_failed'))
        rows.append(row)
    return {
        'cases': len(cases),
        'fit_accuracy': round(fit_right / fit_n, 3) if fit_n else None,
        'fit_cases': fit_n,
        'peak_median_rel_error': round(statistics.median(peak_errs), 3) if peak_errs else None,
        'peak_cases': len(peak_errs),
        'peak_median_rel_error_current': round(statistics.median(current_errs), 3) if current_errs else None,
        'peak_cases_current': len(current_errs),
        'peak_median_rel_error_legacy': round(statistics.median(legacy_errs), 3) if legacy_errs else None,
        'peak_cases_legacy': len(legacy_errs),
        'peak_median_rel_error_current_point': round(statistics.median(current_point), 3) if current_point else None,
        'peak_cases_ranged': ranged,
        'peak_bounds_held': sum(bounds),
        'peak_bounds': len(bounds),
        'device_median_rel_error': round(statistics.median(device_errs), 3) if device_errs else None,
        'device_cases': len(device_errs),
        'vllm_weights_max_rel_error': round(max(w_errs), 3) if w_errs else None,
        'vllm_weights_cases': len(w_errs),
        'vllm_kv_max_rel_error': round(max(kv_errs), 3) if kv_errs else None,
        'vllm_kv_median_rel_error': round(statistics.median(kv_errs), 3) if kv_errs else None,
        'vllm_kv_cases': len(kv_errs),
        'startup_failures_predicted': sf_pred,
        'startup_failures': sf_total,
        'cannot_predict': cannot,
        'replayed': sum(bool(r.get('predicted', {}).get('replayed', '').startswith("torch's reserve")) for r in rows)
        if replay
        else None,
        'per_case': rows,
    }
