/**
 * Checks of deployment files that CI can run without Docker or a cluster: the required fields of
 * the Kubernetes objects this project's examples use and the references between them, and the
 * shape of a Docker Compose file. Each problem names the object and the field, e.g.
 * `Deployment/redis: spec.selector.matchLabels.app: "x" is not among spec.template.metadata.labels`.
 */
import { parse, parseAllDocuments } from "yaml";

/** A parsed YAML mapping. */
type Obj = Record<string, unknown>;

const isObj = (value: unknown): value is Obj => typeof value === "object" && value !== null && !Array.isArray(value);
const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.trim() !== "";
const isStringList = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((item) => typeof item === "string");
/** RFC 1123 label: what Kubernetes accepts for object, container, port and volume names. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The apiVersion of each kind the examples use; another kind is refused so that it gets its own checks. */
const API_VERSIONS: Record<string, string> = {
  ConfigMap: "v1",
  Secret: "v1",
  Service: "v1",
  PersistentVolumeClaim: "v1",
  Deployment: "apps/v1",
  Job: "batch/v1",
};

/** A Kubernetes object of a manifest, with the pod template of workload kinds. */
export interface KubeObject {
  kind: string;
  name: string;
  body: Obj;
  /** `spec.template` of a Deployment or Job. */
  podTemplate?: Obj;
}

/** Parses every document of a multi-document YAML manifest; YAML errors are problems too. */
export function parseManifest(text: string): { objects: KubeObject[]; problems: string[] } {
  const objects: KubeObject[] = [];
  const problems: string[] = [];
  parseAllDocuments(text).forEach((doc, index) => {
    const where = `document ${index + 1}`;
    if (doc.errors.length > 0) {
      problems.push(`${where}: ${doc.errors.map((e) => e.message).join("; ")}`);
      return;
    }
    const body: unknown = doc.toJS();
    if (body === null) return;
    if (!isObj(body)) {
      problems.push(`${where}: expected a mapping, got ${JSON.stringify(body)}`);
      return;
    }
    const kind = isNonEmptyString(body.kind) ? body.kind : undefined;
    const metadata = isObj(body.metadata) ? body.metadata : {};
    const name = isNonEmptyString(metadata.name) ? metadata.name : undefined;
    const label = `${kind ?? where}/${name ?? "?"}`;
    if (kind === undefined) problems.push(`${label}: kind: missing`);
    if (name === undefined) problems.push(`${label}: metadata.name: missing`);
    else if (!DNS_LABEL.test(name)) problems.push(`${label}: metadata.name: "${name}" is not a DNS-1123 label`);
    if (!isNonEmptyString(body.apiVersion)) problems.push(`${label}: apiVersion: missing`);
    if (kind === undefined || name === undefined) return;
    const expected = API_VERSIONS[kind];
    if (expected === undefined) problems.push(`${label}: kind: ${kind} is not one these checks know`);
    else if (isNonEmptyString(body.apiVersion) && body.apiVersion !== expected)
      problems.push(`${label}: apiVersion: ${body.apiVersion} (${kind} is ${expected})`);
    const spec = isObj(body.spec) ? body.spec : undefined;
    const podTemplate =
      (kind === "Deployment" || kind === "Job") && spec && isObj(spec.template) ? spec.template : undefined;
    objects.push({ kind, name, body, ...(podTemplate && { podTemplate }) });
  });
  return { objects, problems };
}

/** The labels of a pod template. */
function templateLabels(template: Obj | undefined): Obj {
  const metadata = template && isObj(template.metadata) ? template.metadata : {};
  return isObj(metadata.labels) ? metadata.labels : {};
}

/** Whether every key of `selector` has the same value in `labels`. */
const selects = (selector: Obj, labels: Obj): boolean =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

/** The containers of a pod template (an empty list when the spec is malformed: that is reported apart). */
function containersOf(template: Obj | undefined): Obj[] {
  const spec = template && isObj(template.spec) ? template.spec : {};
  return Array.isArray(spec.containers) ? spec.containers.filter(isObj) : [];
}

/** Checks a Deployment's or Job's pod template and the names it refers to. */
function checkPodTemplate(object: KubeObject, names: (kind: string) => Set<string>, problems: string[]): void {
  const label = `${object.kind}/${object.name}`;
  const template = object.podTemplate;
  if (template === undefined) {
    problems.push(`${label}: spec.template: missing`);
    return;
  }
  const spec = isObj(template.spec) ? template.spec : undefined;
  if (spec === undefined) {
    problems.push(`${label}: spec.template.spec: missing`);
    return;
  }
  if (object.kind === "Job" && spec.restartPolicy !== "Never" && spec.restartPolicy !== "OnFailure")
    problems.push(
      `${label}: spec.template.spec.restartPolicy: ${JSON.stringify(spec.restartPolicy)} (a Job needs Never or OnFailure)`,
    );
  const volumes = Array.isArray(spec.volumes) ? spec.volumes.filter(isObj) : [];
  const volumeNames = new Set<string>();
  volumes.forEach((volume, i) => {
    const at = `${label}: spec.template.spec.volumes[${i}]`;
    if (!isNonEmptyString(volume.name)) problems.push(`${at}.name: missing`);
    else volumeNames.add(volume.name);
    if (isObj(volume.configMap) && !names("ConfigMap").has(String(volume.configMap.name)))
      problems.push(`${at}.configMap.name: no ConfigMap "${String(volume.configMap.name)}" in the manifest`);
    if (isObj(volume.secret) && !names("Secret").has(String(volume.secret.secretName)))
      problems.push(`${at}.secret.secretName: no Secret "${String(volume.secret.secretName)}" in the manifest`);
    const claim = volume.persistentVolumeClaim;
    if (isObj(claim) && !names("PersistentVolumeClaim").has(String(claim.claimName)))
      problems.push(
        `${at}.persistentVolumeClaim.claimName: no PersistentVolumeClaim "${String(claim.claimName)}" in the manifest`,
      );
  });
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) {
    problems.push(`${label}: spec.template.spec.containers: missing or empty`);
    return;
  }
  const containerNames = new Set<string>();
  spec.containers.forEach((container: unknown, i: number) => {
    const at = `${label}: spec.template.spec.containers[${i}]`;
    if (!isObj(container)) {
      problems.push(`${at}: expected a mapping`);
      return;
    }
    if (!isNonEmptyString(container.name)) problems.push(`${at}.name: missing`);
    else if (!DNS_LABEL.test(container.name)) problems.push(`${at}.name: "${container.name}" is not a DNS-1123 label`);
    else if (containerNames.has(container.name)) problems.push(`${at}.name: "${container.name}" is used twice`);
    else containerNames.add(container.name);
    if (!isNonEmptyString(container.image)) problems.push(`${at}.image: missing`);
    for (const key of ["command", "args"])
      if (container[key] !== undefined && !isStringList(container[key]))
        problems.push(`${at}.${key}: expected a list of strings`);
    const env = Array.isArray(container.env) ? container.env : [];
    env.forEach((entry: unknown, j: number) => {
      const envAt = `${at}.env[${j}]`;
      if (!isObj(entry) || !isNonEmptyString(entry.name)) {
        problems.push(`${envAt}.name: missing`);
        return;
      }
      const from = isObj(entry.valueFrom) ? entry.valueFrom : undefined;
      if (from === undefined && typeof entry.value !== "string")
        problems.push(`${envAt}: ${entry.name} has neither a string value nor valueFrom`);
      if (from && isObj(from.secretKeyRef) && !names("Secret").has(String(from.secretKeyRef.name)))
        problems.push(
          `${envAt}.valueFrom.secretKeyRef.name: no Secret "${String(from.secretKeyRef.name)}" in the manifest`,
        );
      if (from && isObj(from.configMapKeyRef) && !names("ConfigMap").has(String(from.configMapKeyRef.name)))
        problems.push(
          `${envAt}.valueFrom.configMapKeyRef.name: no ConfigMap "${String(from.configMapKeyRef.name)}" in the manifest`,
        );
    });
    const mounts = Array.isArray(container.volumeMounts) ? container.volumeMounts : [];
    mounts.forEach((mount: unknown, j: number) => {
      if (!isObj(mount) || !volumeNames.has(String(mount.name)))
        problems.push(
          `${at}.volumeMounts[${j}].name: no volume "${isObj(mount) ? String(mount.name) : "?"}" in the pod's spec.volumes`,
        );
      else if (!isNonEmptyString(mount.mountPath)) problems.push(`${at}.volumeMounts[${j}].mountPath: missing`);
    });
    const ports = Array.isArray(container.ports) ? container.ports : [];
    ports.forEach((port: unknown, j: number) => {
      const value = isObj(port) ? port.containerPort : undefined;
      if (!(Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535))
        problems.push(`${at}.ports[${j}].containerPort: ${JSON.stringify(value)} is not a port number`);
    });
  });
}

/** The names of the container ports of a pod template. */
function portNames(template: Obj | undefined): Set<string> {
  return new Set(
    containersOf(template).flatMap((container) =>
      (Array.isArray(container.ports) ? container.ports.filter(isObj) : [])
        .map((port) => port.name)
        .filter(isNonEmptyString),
    ),
  );
}

/**
 * Every problem of a Kubernetes manifest: required fields (apiVersion, kind, metadata.name), a
 * Deployment's selector matching its template's labels, containers with a name and an image, a
 * Job's restart policy, Services selecting the pods of a workload in the manifest (and their named
 * target ports), and ConfigMaps, Secrets and claims referred to existing in the manifest. A
 * Secret must carry no value: keys are created out of band, never written in a manifest.
 */
export function checkKubernetes(text: string): string[] {
  const { objects, problems } = parseManifest(text);
  const names = (kind: string) => new Set(objects.filter((o) => o.kind === kind).map((o) => o.name));
  const seen = new Set<string>();
  for (const object of objects) {
    const label = `${object.kind}/${object.name}`;
    if (seen.has(label)) problems.push(`${label}: metadata.name: declared twice`);
    seen.add(label);
    const spec = isObj(object.body.spec) ? object.body.spec : undefined;
    switch (object.kind) {
      case "Deployment": {
        const matchLabels = spec && isObj(spec.selector) ? spec.selector.matchLabels : undefined;
        if (!isObj(matchLabels) || Object.keys(matchLabels).length === 0)
          problems.push(`${label}: spec.selector.matchLabels: missing or empty`);
        else {
          const labels = templateLabels(object.podTemplate);
          for (const [key, value] of Object.entries(matchLabels))
            if (labels[key] !== value)
              problems.push(
                `${label}: spec.selector.matchLabels.${key}: ${JSON.stringify(value)} is not among spec.template.metadata.labels`,
              );
        }
        if (spec?.replicas !== undefined && !(Number.isInteger(spec.replicas) && (spec.replicas as number) >= 0))
          problems.push(`${label}: spec.replicas: ${JSON.stringify(spec.replicas)} is not a count`);
        checkPodTemplate(object, names, problems);
        break;
      }
      case "Job":
        checkPodTemplate(object, names, problems);
        break;
      case "Service": {
        const selector = spec?.selector;
        if (!isObj(selector) || Object.keys(selector).length === 0) {
          problems.push(`${label}: spec.selector: missing or empty`);
          break;
        }
        const targets = objects.filter((o) => o.podTemplate && selects(selector, templateLabels(o.podTemplate)));
        if (targets.length === 0)
          problems.push(`${label}: spec.selector: ${JSON.stringify(selector)} selects no pod template in the manifest`);
        const ports = Array.isArray(spec?.ports) ? spec.ports : [];
        if (ports.length === 0) problems.push(`${label}: spec.ports: missing or empty`);
        ports.forEach((port: unknown, i: number) => {
          const p = isObj(port) ? port : {};
          if (!(Number.isInteger(p.port) && (p.port as number) >= 1 && (p.port as number) <= 65535))
            problems.push(`${label}: spec.ports[${i}].port: ${JSON.stringify(p.port)} is not a port number`);
          if (
            typeof p.targetPort === "string" &&
            targets.length > 0 &&
            !targets.every((t) => portNames(t.podTemplate).has(p.targetPort as string))
          )
            problems.push(`${label}: spec.ports[${i}].targetPort: no container port named "${p.targetPort}"`);
        });
        break;
      }
      case "ConfigMap": {
        const data = object.body.data;
        if (!isObj(data) || Object.keys(data).length === 0) problems.push(`${label}: data: missing or empty`);
        else
          for (const [key, value] of Object.entries(data))
            if (typeof value !== "string") problems.push(`${label}: data.${key}: expected a string`);
        break;
      }
      case "Secret":
        for (const field of ["data", "stringData"]) {
          const values = object.body[field];
          if (isObj(values) && Object.keys(values).length > 0)
            problems.push(
              `${label}: ${field}: holds ${Object.keys(values).join(", ")}; keys are never written in a manifest (kubectl create secret)`,
            );
        }
        break;
      case "PersistentVolumeClaim": {
        const storage =
          spec && isObj(spec.resources) && isObj(spec.resources.requests) && spec.resources.requests.storage;
        if (!isStringList(spec?.accessModes) || spec.accessModes.length === 0)
          problems.push(`${label}: spec.accessModes: missing or empty`);
        if (!isNonEmptyString(storage)) problems.push(`${label}: spec.resources.requests.storage: missing`);
        break;
      }
    }
  }
  return problems;
}

/** A Compose service, after YAML merge keys (`<<: *anchor`) are applied. */
export type ComposeService = Obj;

/** Environment variable names whose values are secrets: they must come from the shell, never be written. */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD/i;
/** A Compose interpolation of a variable of the shell or `.env`, e.g. `${NEXRL_API_KEY:?message}`. */
const INTERPOLATION = /^\$\{[A-Za-z_][A-Za-z0-9_]*(:?[-?][^}]*)?\}$/;

/** The services of a Compose file (merge keys applied) and its problems. */
export function checkCompose(text: string): { services: Record<string, ComposeService>; problems: string[] } {
  const problems: string[] = [];
  let file: unknown;
  try {
    file = parse(text, { merge: true });
  } catch (error) {
    return { services: {}, problems: [`YAML: ${(error as Error).message}`] };
  }
  if (!isObj(file) || !isObj(file.services) || Object.keys(file.services).length === 0)
    return { services: {}, problems: ["services: missing or empty"] };
  const services = file.services as Record<string, unknown>;
  const volumes = isObj(file.volumes) ? file.volumes : {};
  for (const [name, service] of Object.entries(services)) {
    const at = `services.${name}`;
    if (!isObj(service)) {
      problems.push(`${at}: expected a mapping`);
      continue;
    }
    if (!isNonEmptyString(service.image) && service.build === undefined)
      problems.push(`${at}: neither image nor build`);
    if (service.command !== undefined && !isStringList(service.command))
      problems.push(`${at}.command: expected a list of strings (exec form)`);
    const dependsOn = isObj(service.depends_on)
      ? service.depends_on
      : Object.fromEntries((isStringList(service.depends_on) ? service.depends_on : []).map((d) => [d, {}]));
    for (const [dependency, options] of Object.entries(dependsOn)) {
      const target = services[dependency];
      if (!isObj(target)) problems.push(`${at}.depends_on.${dependency}: no such service`);
      else if (isObj(options) && options.condition === "service_healthy" && !isObj(target.healthcheck))
        problems.push(
          `${at}.depends_on.${dependency}: waits for service_healthy, but ${dependency} has no healthcheck`,
        );
    }
    const mounts = Array.isArray(service.volumes) ? service.volumes : [];
    mounts.forEach((mount: unknown, i: number) => {
      const source = typeof mount === "string" ? mount.split(":")[0]! : "";
      if (source === "" || (!/^[./~]/.test(source) && !(source in volumes)))
        problems.push(`${at}.volumes[${i}]: no volume "${source}" in the top-level volumes`);
    });
    const environment = isObj(service.environment) ? service.environment : {};
    for (const [key, value] of Object.entries(environment))
      if (SECRET_NAME.test(key) && !(typeof value === "string" && INTERPOLATION.test(value)))
        problems.push(`${at}.environment.${key}: a secret written in the file; use \${VARIABLE} from the shell`);
  }
  return { services: services as Record<string, ComposeService>, problems };
}
