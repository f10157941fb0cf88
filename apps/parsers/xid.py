"""NVIDIA Xid catalogue as data: number → name, meaning and the typical action.

Names and meanings follow NVIDIA's "Xid Errors" documentation (docs.nvidia.com/deploy/xid-errors, the catalogue of
Ampere and newer GPUs); the action is the catalogue's resolution (restart the application, reset the GPU, reboot,
contact support) written out for an operator. ``category`` says where to look first. An Xid not listed here is
reported with its number and the driver's own message, never given a made-up meaning.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class XidInfo:
    number: int
    name: str
    meaning: str
    action: str
    category: str  # application | driver | memory | hardware | nvlink | bus


_RESTART_APP = "Restart the application; if the same Xid comes back on the same GPU, run DCGM diagnostics on it."
_RESET_GPU = "Drain the GPU and reset it (nvidia-smi -r) or reboot the node; if the Xid comes back, contact support."

CATALOGUE: dict[int, XidInfo] = {
    info.number: info
    for info in (
        XidInfo(
            13,
            "Graphics Engine Exception",
            "The graphics/compute engine raised an exception: most often the application (out-of-range address, "
            "illegal instruction), sometimes the driver, rarely memory or hardware.",
            _RESTART_APP + " Debug the application with compute-sanitizer.",
            "application",
        ),
        XidInfo(
            31,
            "GPU memory page fault",
            "The GPU's MMU reported an illegal address access by an engine on the chip: usually an application bug, "
            "sometimes the driver or hardware.",
            _RESTART_APP + " Debug the application with compute-sanitizer.",
            "application",
        ),
        XidInfo(
            32,
            "Invalid or corrupted push buffer stream",
            "The DMA controller that carries the driver's commands to the GPU over PCIe saw a corrupted stream: "
            "most often PCIe signal quality.",
            "Check the PCIe link (AER errors in dmesg, lspci link speed and width); reseat or replace the GPU or "
            "riser if it recurs.",
            "bus",
        ),
        XidInfo(
            38,
            "Driver firmware error",
            "The NVIDIA driver's firmware reported an error.",
            "Reboot the node; if it recurs, update the driver and contact support.",
            "driver",
        ),
        XidInfo(
            43,
            "GPU stopped processing",
            "The GPU stopped a channel after the application hit a software-induced fault; the GPU stays healthy.",
            "Restart the application; look for the Xid (13, 31) that came before it.",
            "application",
        ),
        XidInfo(
            45,
            "Preemptive cleanup, due to previous errors",
            "The driver removed a channel: the application was stopped (killed, Ctrl-C) or an earlier error forced it.",
            "No action on its own; look for the earlier Xid on the same GPU (the message may name it).",
            "application",
        ),
        XidInfo(
            48,
            "Double Bit ECC Error",
            "An uncorrectable double-bit ECC error (DBE) in GPU memory.",
            "Drain the GPU and reset it so page retirement or row remapping takes effect; if it recurs, RMA.",
            "memory",
        ),
        XidInfo(
            61,
            "Internal micro-controller breakpoint/warning",
            "The GPU's internal micro-controller hit a breakpoint or raised a warning.",
            _RESET_GPU,
            "driver",
        ),
        XidInfo(
            62,
            "Internal micro-controller halt",
            "The GPU's internal micro-controller halted.",
            _RESET_GPU,
            "hardware",
        ),
        XidInfo(
            63,
            "ECC page retirement or row remapping recording event",
            "After an ECC error the driver recorded a page retirement or a row remap; it takes effect on the next "
            "GPU reset.",
            "Reset the GPU when it is idle to activate the remap; check nvidia-smi -q -d ROW_REMAPPER.",
            "memory",
        ),
        XidInfo(
            64,
            "ECC page retirement or row remapper recording failure",
            "Recording a page retirement or a row remap failed.",
            "Drain and reset the GPU; check nvidia-smi -q -d ROW_REMAPPER; RMA when remapping failed.",
            "memory",
        ),
        XidInfo(
            68,
            "NVDEC0 Exception",
            "The video decoder engine (NVDEC) raised an exception.",
            _RESTART_APP,
            "driver",
        ),
        XidInfo(
            69,
            "Graphics Engine class error",
            "The graphics engine rejected a class or method: usually an application or driver error.",
            _RESTART_APP,
            "application",
        ),
        XidInfo(
            74,
            "NVLINK Error",
            "An NVLink link reported an error; the message names the link and the error bits.",
            "Read the NVLink error counters (nvidia-smi nvlink -e, dcgmi nvlink -e); reset the GPU; if the link "
            "errors persist, reseat or replace the baseboard.",
            "nvlink",
        ),
        XidInfo(
            79,
            "GPU has fallen off the bus",
            "The GPU stopped answering on PCIe: the driver can no longer reach it.",
            "Drain the node, collect nvidia-bug-report and dmesg, power-cycle it (a GPU reset rarely brings it back); "
            "check PCIe, power and cooling; RMA if it recurs.",
            "hardware",
        ),
        XidInfo(
            92,
            "High single-bit ECC error rate",
            "Correctable (single-bit) ECC errors arrive at an unusually high rate.",
            "Watch the ECC counters; plan a GPU reset; RMA if the rate stays high.",
            "memory",
        ),
        XidInfo(
            94,
            "Contained ECC error",
            "An uncorrectable ECC error that the GPU contained: only the applications using that memory are affected.",
            "Restart the affected applications; reset the GPU when it is idle so the row is remapped.",
            "memory",
        ),
        XidInfo(
            95,
            "Uncontained ECC error",
            "An uncorrectable ECC error that could not be contained: every application on the GPU is affected.",
            "Drain the GPU and reset it before running anything on it again; RMA if it recurs.",
            "memory",
        ),
        XidInfo(
            119,
            "GSP RPC Timeout",
            "The driver timed out waiting for the GPU System Processor (GSP) firmware to answer a call.",
            _RESET_GPU,
            "driver",
        ),
        XidInfo(
            120,
            "GSP Error",
            "Code running on the GPU System Processor (GSP) reported an error.",
            _RESET_GPU,
            "driver",
        ),
        XidInfo(
            121,
            "C2C Link corrected error",
            "The chip-to-chip (C2C) link between the GPU and its CPU corrected errors.",
            "Watch for repeats; reset the GPU at the next maintenance window; contact support if they persist.",
            "hardware",
        ),
        XidInfo(
            140,
            "Unrecovered ECC Error",
            "The driver observed uncorrectable errors in GPU memory in a way that interrupted its ability to mark "
            "the pages for dynamic page offlining or row remapping.",
            "Drain the GPU and reset it; if it recurs, contact the hardware vendor.",
            "memory",
        ),
    )
}


def xid_info(number: int) -> XidInfo | None:
    return CATALOGUE.get(number)
