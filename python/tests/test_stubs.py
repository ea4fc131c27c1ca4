# SPDX-License-Identifier: Apache-2.0
"""_dlsync.pyi against the module it describes: every function and method of the module has
a stub and a text signature (inspect.signature, help()), every stub names something of the
module, their parameters agree (names, positional-only or keyword, defaults), and what the
functions return in sample calls is of the kind the stub says."""
import ast
import inspect
import os
import typing
import unittest

import dlsync
import dlsync.testing
from dlsync import _dlsync

try:
    import numpy
except ImportError:
    numpy = None

STUB = os.path.join(os.path.dirname(_dlsync.__file__), "_dlsync.pyi")

KINDS = {"posonlyargs": inspect.Parameter.POSITIONAL_ONLY,
         "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
         "kwonlyargs": inspect.Parameter.KEYWORD_ONLY}


def stub_parameters(function, method):
    """[(name, kind, has_default)] of a stub's def, without self or cls."""
    args = function.args
    out = []
    positional = [(a, "posonlyargs") for a in getattr(args, "posonlyargs", [])] + \
                 [(a, "args") for a in args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for (arg, kind), default in zip(positional, defaults):
        out.append((arg.arg, KINDS[kind], default is not None))
    if args.vararg:
        out.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, False))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        out.append((arg.arg, KINDS["kwonlyargs"], default is not None))
    if args.kwarg:
        out.append((args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, False))
    return out[1:] if method and out and out[0][0] in ("self", "cls") else out


def module_parameters(name, obj):
    """[(name, kind, has_default)] of a function of the module, from its text signature."""
    signature = inspect.signature(obj)
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty)
            for p in signature.parameters.values()]


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def stub_functions():
    """{name: (FunctionDef, owner)}: owner None for the module's, else the class's name."""
    out = {}
    for node in stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = (node, None)
        elif isinstance(node, ast.ClassDef) and node.name in ("ExchangeArray", "_Sim"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = (item, node.name)
    return out


def runtime_functions():
    """{name: object} of everything callable the stub must describe."""
    out = {}
    for name in dir(_dlsync):
        obj = getattr(_dlsync, name)
        if callable(obj) and not isinstance(obj, type):
            out[name] = obj
    for name in ("__init__", "__dlpack__", "__dlpack_device__", "use_stream", "current_stream"):
        out[f"ExchangeArray.{name}"] = _dlsync.ExchangeArray if name == "__init__" else \
            getattr(_dlsync.ExchangeArray, name)
    for name in dir(_dlsync._sim):
        obj = getattr(_dlsync._sim, name)
        if callable(obj) and not name.startswith("__"):
            out[f"_Sim.{name}"] = obj
    return out


def conforms(value, annotation):
    """Whether value is of the stub's annotation (the forms _dlsync.pyi uses)."""
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return value is None
    if isinstance(annotation, ast.Name):
        simple = {"int": int, "bool": bool, "str": str, "float": (float, int), "object": object}
        if annotation.id in simple:
            if annotation.id == "int" and isinstance(value, bool):
                return False
            return isinstance(value, simple[annotation.id])
        return True  # an alias (Device, StreamObject): not a return kind here
    if isinstance(annotation, ast.Subscript):
        head = annotation.value.id
        inner = annotation.slice
        inner = getattr(inner, "value", inner)  # 3.8's ast.Index
        items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        if head == "Optional":
            return value is None or conforms(value, items[0])
        if head == "Union":
            return any(conforms(value, item) for item in items)
        if head == "Tuple":
            return isinstance(value, tuple) and len(value) == len(items) and \
                all(conforms(v, item) for v, item in zip(value, items))
        if head == "List":
            return isinstance(value, list) and all(conforms(v, items[0]) for v in value)
        if head == "Dict":
            return isinstance(value, dict)
    raise AssertionError(f"the test does not know the annotation {ast.dump(annotation)}")


class Stubs(unittest.TestCase):
    def test_every_function_has_a_text_signature(self):
        for name, obj in runtime_functions().items():
            with self.subTest(name):
                self.assertIsNotNone(inspect.signature(obj))

    def test_the_stub_and_the_module_name_the_same_functions(self):
        self.assertEqual(sorted(stub_functions()), sorted(runtime_functions()))

    def test_the_parameters_agree(self):
        runtime = runtime_functions()
        for name, (function, owner) in stub_functions().items():
            with self.subTest(name):
                got = module_parameters(name.split(".")[-1], runtime[name])
                if owner is not None and got and got[0][0] in ("self", "cls"):
                    got = got[1:]  # an unbound method descriptor's
                self.assertEqual(stub_parameters(function, owner is not None), got)

    def returns(self, name, value):
        function, _ = stub_functions()[name]
        self.assertTrue(conforms(value, function.returns),
                        f"{name} returned {value!r}; its stub says {ast.unparse(function.returns)}"
                        if hasattr(ast, "unparse") else f"{name} returned {value!r}")

    def test_what_sample_calls_return_is_what_the_stubs_say(self):
        self.returns("release_poll", dlsync.release_poll())
        self.returns("release_thread_running", dlsync.release_thread_running())
        self.returns("release_thread", dlsync.release_thread(True))
        self.returns("get_capture_policy", dlsync.get_capture_policy())
        self.returns("set_capture_policy", dlsync.set_capture_policy(dlsync.get_capture_policy()))
        self.returns("stream_from_arg", dlsync.stream_from_arg((2, 0), 5))
        self.returns("stream_to_arg", dlsync.stream_to_arg((2, 0), None))
        self.returns("stream_to_arg", dlsync.stream_to_arg((2, 0), 5))
        self.returns("export", dlsync.export((1, 0), None, None))
        self.returns("_raise_status", _dlsync._raise_status(0))
        self.returns("_check_producer", _dlsync._check_producer(5))
        self.returns("_exchange_deletions", _dlsync._exchange_deletions())
        with dlsync.testing.SimulatedDevice() as sim:
            stream = sim.stream()
            dlsync.testing.ExchangeArray.use_stream(stream)
            self.returns("ExchangeArray.current_stream", dlsync.testing.ExchangeArray.current_stream())
            array = dlsync.testing.ExchangeArray(bytearray(16))
            self.returns("ExchangeArray.__dlpack_device__", array.__dlpack_device__())
            self.returns("_exchange_dltensor", _dlsync._exchange_dltensor(array))
            self.returns("_exchange_current_work_stream",
                         _dlsync._exchange_current_work_stream(array, (2, 0)))
            self.returns("_exchange_table_chain", _dlsync._exchange_table_chain(array))
            capsule = dlsync.import_tensor(array, (2, 0), stream)
            self.returns("import_tensor", capsule)
            self.returns("tensor_release", dlsync.tensor_release(capsule, -1))
            self.returns("_Sim.race_count", dlsync.testing._sim.race_count())
            self.returns("_Sim.race_report", dlsync.testing._sim.race_report())
            self.returns("_Sim.capture_status", dlsync.testing._sim.capture_status(stream.handle))
            self.returns("_Sim.calls_holding_the_gil", dlsync.testing._sim.calls_holding_the_gil())
            stream.begin_capture()
            self.returns("_Sim.end_capture", dlsync.testing._sim.end_capture(stream.handle))

    @unittest.skipIf(numpy is None, "the table producer needs NumPy (python3-numpy)")
    def test_a_table_without_a_dltensor_view_is_none(self):
        """_exchange_dltensor's stub said Dict: a table without the optional view function
        gives None."""
        import ctypes

        import table_producer

        table = table_producer.DLPackExchangeAPI()
        ctypes.memmove(ctypes.addressof(table), ctypes.addressof(table_producer.TABLE),
                       ctypes.sizeof(table))
        table.dltensor_from_py_object_no_sync = type(table_producer.TABLE.dltensor_from_py_object_no_sync)()

        class NoView(table_producer.TableArray):
            __dlpack_c_exchange_api__ = table_producer._capsule_new(
                ctypes.addressof(table), b"dlpack_exchange_api", None)

        view = _dlsync._exchange_dltensor(NoView(numpy.zeros(4, numpy.uint8)))
        self.returns("_exchange_dltensor", view)
        self.assertIsNone(view)


if __name__ == "__main__":
    unittest.main()
