"""Not a stand-in: an ms-swift `--external_plugins` file that measures the real GRPO trainer. It wraps
GRPOTrainer.compute_loss and accelerate's backward of the running `swift rlhf` in grpo_recipes.trace.LiveBytes
(the counter `grpo-guard trace` uses, here on real CPU tensors) and appends, per training micro-batch, the step's
peak of newly allocated bytes, the input shape and the completion length to $GRPO_MEASURE_OUT (JSON lines)."""
import json
import os

from swift.rlhf_trainers.grpo_trainer import GRPOTrainer

from grpo_recipes.trace import LiveBytes

_compute_loss = GRPOTrainer.compute_loss


def compute_loss(self, model, inputs, *args, **kwargs):
    if not model.training:
        return _compute_loss(self, model, inputs, *args, **kwargs)
    counter = LiveBytes()
    counter.stage = 'swift rlhf forward'
    counter.mode.__enter__()
    try:
        loss = _compute_loss(self, model, inputs, *args, **kwargs)
    except BaseException:
        counter.mode.__exit__(None, None, None)
        raise
    batch = inputs[0] if isinstance(inputs, list) else inputs
    ids = batch['model_inputs']['input_ids']
    self._grpo_measure = (counter, list(ids.shape), int(batch['grpo_batch'].logits_to_keep))
    if not getattr(self.accelerator, '_grpo_measure_wrapped', False):
        original = self.accelerator.backward

        def backward(loss, **kw):
            try:
                counter_now = self._grpo_measure[0]
                counter_now.stage = 'swift rlhf backward'
                return original(loss, **kw)
            finally:
                c, shape, completion = self._grpo_measure
                c.mode.__exit__(None, None, None)
                with open(os.environ['GRPO_MEASURE_OUT'], 'a') as f:
                    f.write(json.dumps({'peak_bytes': c.peak, 'peak_at': c.peak_at, 'shape': shape,
                                        'completion': completion}) + '\n')
        self.accelerator.backward = backward
        self.accelerator._grpo_measure_wrapped = True
    return loss


GRPOTrainer.compute_loss = compute_loss
