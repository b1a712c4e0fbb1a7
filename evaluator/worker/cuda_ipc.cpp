// _korch_cuda: the trusted CUDA helpers the GPU judge and runners share
// (DESIGN §5). A built-in module of korch-worker (PyImport_AppendInittab),
// compiled only when the worker links a CUDA LibTorch.
//
// The judge owns every buffer a runner touches: it allocates them here with
// cudaMalloc (so each pointer is an allocation base and has its own IPC
// handle), exports them once, and a runner opens each handle once. torch's
// own storage sharing is not used: its reference-counter file is created 0600
// in /dev/shm by the judge's uid and cannot be opened by the runner's.
//
//   alloc(nbytes) -> int            cudaMalloc on the current device
//   free(ptr)
//   export(ptr) -> bytes            cudaIpcGetMemHandle (64 bytes)
//   open(handle) -> int             cudaIpcOpenMemHandle (lazy peer access)
//   close(ptr)
//   device_sync()                   cudaDeviceSynchronize; raises on a sticky error
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace {

PyObject* cuda_error(cudaError_t e, const char* what) {
  PyErr_Format(PyExc_RuntimeError, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return nullptr;
}

PyObject* py_alloc(PyObject*, PyObject* args) {
  unsigned long long n = 0;
  if (!PyArg_ParseTuple(args, "K", &n)) return nullptr;
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, n ? n : 1);
  if (e != cudaSuccess) return cuda_error(e, "cudaMalloc");
  return PyLong_FromUnsignedLongLong(reinterpret_cast<std::uintptr_t>(p));
}

PyObject* py_free(PyObject*, PyObject* args) {
  unsigned long long p = 0;
  if (!PyArg_ParseTuple(args, "K", &p)) return nullptr;
  cudaError_t e = cudaFree(reinterpret_cast<void*>(p));
  if (e != cudaSuccess) return cuda_error(e, "cudaFree");
  Py_RETURN_NONE;
}

PyObject* py_export(PyObject*, PyObject* args) {
  unsigned long long p = 0;
  if (!PyArg_ParseTuple(args, "K", &p)) return nullptr;
  cudaIpcMemHandle_t h;
  cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(p));
  if (e != cudaSuccess) return cuda_error(e, "cudaIpcGetMemHandle");
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(&h), sizeof h);
}

PyObject* py_open(PyObject*, PyObject* args) {
  const char* buf = nullptr;
  Py_ssize_t n = 0;
  if (!PyArg_ParseTuple(args, "y#", &buf, &n)) return nullptr;
  cudaIpcMemHandle_t h;
  if (n != static_cast<Py_ssize_t>(sizeof h)) {
    PyErr_SetString(PyExc_ValueError, "an IPC handle is 64 bytes");
    return nullptr;
  }
  std::memcpy(&h, buf, sizeof h);
  void* p = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) return cuda_error(e, "cudaIpcOpenMemHandle");
  return PyLong_FromUnsignedLongLong(reinterpret_cast<std::uintptr_t>(p));
}

PyObject* py_close(PyObject*, PyObject* args) {
  unsigned long long p = 0;
  if (!PyArg_ParseTuple(args, "K", &p)) return nullptr;
  cudaError_t e = cudaIpcCloseMemHandle(reinterpret_cast<void*>(p));
  if (e != cudaSuccess) return cuda_error(e, "cudaIpcCloseMemHandle");
  Py_RETURN_NONE;
}

PyObject* py_device_sync(PyObject*, PyObject*) {
  cudaError_t e;
  Py_BEGIN_ALLOW_THREADS e = cudaDeviceSynchronize();
  Py_END_ALLOW_THREADS if (e != cudaSuccess) return cuda_error(e, "cudaDeviceSynchronize");
  Py_RETURN_NONE;
}

PyMethodDef k_methods[] = {
    {"alloc", py_alloc, METH_VARARGS, "cudaMalloc(nbytes) -> pointer"},
    {"free", py_free, METH_VARARGS, "cudaFree(pointer)"},
    {"export", py_export, METH_VARARGS, "cudaIpcGetMemHandle(pointer) -> bytes"},
    {"open", py_open, METH_VARARGS, "cudaIpcOpenMemHandle(bytes) -> pointer"},
    {"close", py_close, METH_VARARGS, "cudaIpcCloseMemHandle(pointer)"},
    {"device_sync", py_device_sync, METH_NOARGS, "cudaDeviceSynchronize()"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef k_module = {PyModuleDef_HEAD_INIT,
                        "_korch_cuda",
                        "korch's trusted CUDA IPC helpers",
                        -1,
                        k_methods,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr};

}  // namespace

extern "C" PyObject* korch_init_cuda_module() { return PyModule_Create(&k_module); }
