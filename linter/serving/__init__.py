"""What the serving engines (SGLang, vLLM) do with tuning tables, as data.

* :mod:`.data` -- the engine release profiles' JSON (``data/engine_profiles/*.json``), read
  once: file-name grammar, folders searched, device-name spelling, default configs, launch
  adjustments; :mod:`.profiles` -- the same as the doctor's ``Profile`` objects (formulas
  compiled);
* :mod:`.naming` -- the file names an engine asks for and never asks for, the device a name
  stands for, which engine a name's marks point to;
* :mod:`.launch` -- the launcher's changes to a table entry (vLLM's swap of A and B on sm_90,
  its BLOCK_SIZE_K clamp to the quantisation block).

Not to be confused with :mod:`tilefit.engine`, the lint engine that runs the rules.
"""
