"""Never imported by scorer: the name of this module's bytecode file is where ``scorer.codecache`` keeps
its cache of attrs' generated code (``importlib.util.cache_from_source`` of this file:
``__pycache__/codecache_slot.cpython-311.pyc`` beside scorer's own bytecode, or under
``sys.pycache_prefix`` when one is set).

pip, when it uninstalls a package, removes the files it installed and each module's bytecode file,
and nothing else. A cache file of any other name stayed behind, and with it ``scorer/`` itself: a
directory without ``__init__.py``, which Python then takes for a namespace package, hiding an
editable install of scorer made after it (``import scorer`` then finds no ``__version__``). Under
this name, pip removes the cache with the package.

Importing this module is harmless: Python finds that the file is not bytecode of its own (no magic
number), compiles this source and writes its bytecode there; the next ``scorer`` command builds the
cache again.
"""
