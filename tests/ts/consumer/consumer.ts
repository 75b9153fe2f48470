// A downstream project's code, type-checked against the packed npm tarball. The @ts-expect-error
// lines fail the check if a type ever degrades to `any` or loses a field.
import { probe, init, FuselmError, type AdapterReport, type ProbeOptions, type ErrorKind, type Measurement } from "fuselm";

function describeKind(kind: ErrorKind): string {
  switch (kind) {
    case "webgpu-unavailable": return "no WebGPU in this browser";
    case "no-adapter": return "no GPU adapter";
    case "device-request": return "device refused";
    case "limit-exceeded": return "model too big";
    case "gpu": return "GPU error";
    case "invalid-argument": return "bad argument";
    default: {
      const unreachable: never = kind; // ErrorKind must stay a closed union
      return unreachable;
    }
  }
}

export async function main(): Promise<void> {
  await init();
  const options: ProbeOptions = { bench: true, benchBytes: 16 * 2 ** 20, runs: 3 };
  try {
    const report: AdapterReport = await probe(options);
    const binding: number = report.limits.maxStorageBufferBindingSize;
    const def: number = report.webgpuDefaults.maxStorageBufferBindingSize;
    const f16: boolean = report.features.shaderF16 && report.fit.f16Kernels;
    const arch: string = report.adapter.architecture;
    const dispatch: Measurement | undefined = report.bench?.dependentDispatch;
    const timer: "timestamp-query" | "wall-clock" | undefined = dispatch?.timer;
    console.log(binding, def, f16, arch, dispatch?.median, timer, report.fit.maxResidentDimF32);

    // @ts-expect-error bench is a boolean
    await probe({ bench: "yes" });
    // @ts-expect-error limits are numbers
    const wrong: string = report.limits.maxBufferSize;
    // @ts-expect-error no such field
    console.log(report.limits.maxTextureSize, wrong);
  } catch (e) {
    if (e instanceof FuselmError) {
      console.log(describeKind(e.kind), e.limit, e.needed, e.available);
    }
  }
}
