"""Every rule id olarespack reports (`olarespack lint --rules`): its layer, what it protects against, and
where it comes from. The rules every engine shares are here; an engine's own are declared by its package
(engines/<kind>/catalog.py) and registered here by engines/__init__.py. A rule that mirrors Olares' own linter
names the oac function (beclab/Olares framework/oac); one olarespack adds names the failure it prevents, and is
only an error when that failure is proven (the box or the engine refuses), otherwise a warning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Rule(NamedTuple):
    layer: str
    text: str
    source: str


OWN = "olarespack"
_SPEC = f"{OWN}: the spec"

RULES: dict[str, Rule] = {
    # spec: the file and its models (olarespack's own input)
    "yaml": Rule("spec", "the file is valid YAML, a mapping, without duplicate keys, anchors or deep nesting", _SPEC),
    "file": Rule("spec", "the spec file is a regular file of at most 1 MiB that can be read", _SPEC),
    "encoding": Rule("spec", "the spec file is UTF-8", _SPEC),
    "control-character": Rule("spec", "no control or hidden characters in spec text (newlines only in prose)",
                              _SPEC),
    "spec-unknown-key": Rule("spec", "no unknown or misspelt keys", _SPEC),
    "spec-missing": Rule("spec", "required fields are present", _SPEC),
    "spec-type": Rule("spec", "values have the right type (a number is not quoted, a list is a list)", _SPEC),
    "spec-range": Rule("spec", "numbers are in range (utilization 0-1, startup budget over 30 minutes, ...)", _SPEC),
    "spec-format": Rule("spec", "names, titles and images match their formats (title 1-30 characters, ...)", _SPEC),
    "spec-choice": Rule("spec", "enumerated values are known (engine kind, KV cache dtype, ...)", _SPEC),
    "semver": Rule("spec", "versions are strict SemVer 2", _SPEC),
    "reserved-name": Rule("spec", "the app name is not one Olares reserves", "oac chartfolder (PR titles); "
                          "app-service refuses these names"),
    "hardware-profile": Rule("spec", "the hardware profile exists", _SPEC),
    "template-marker": Rule("spec", "no {{ }} anywhere; [[ ]] citations only in descriptions",
                            f"{OWN}: Helm and Olares would execute {{{{ }}}} from a spec"),
    "quantity": Rule("spec", "resources are Kubernetes quantities (apimachinery's grammar)", _SPEC),
    "changelog-version": Rule("spec", "the version has a changelog entry at the top", _SPEC),
    "changelog-order": Rule("spec", "the changelog is newest first, one entry per version", _SPEC),
    "changelog-date": Rule("release", "every release has a date (its own, or its commit's)",
                           "beclab/market keys the version history by mergedAt"),
    "resource-limit": Rule("spec", "limits are not below requests", "Kubernetes refuses requests above limits"),
    "gpu-memory-device": Rule("spec", "GPU memory fits the hardware profile's device (one app; under Memory "
                              "Slicing the quotas of all apps on the card must add up to no more than it, which "
                              "lint cannot see: `olarespack plan` checks the sum)",
                              "app-service installCapacityFits: the card must hold requiredGPUMemory"),
    "gpu-memory-booking": Rule("spec", "GPU memory request and limit are equal",
                               "app-service's GPU webhook sets the limit to requiredGPUMemory"),
    "chart-owned-env": Rule("spec", "the spec does not set env vars the chart owns", _SPEC),
    "llm-gateway-route": Rule("spec", "the app is listed in Router (LLMGatewaySupported) only with a shared entrance "
                              "Router can call", _SPEC),
    "pinned-model-shape": Rule("spec", "a pinned-model app (olares.pinned_model) is what the official shape can "
                               "carry: current generation, the model addressed by MODEL_NAME, its files in the "
                               "shared Hugging Face cache, the wrapper's port", "beclab/Olares official LLM apps "
                               "(llm-init wrappers: -hf/--model \"$MODEL_NAME\", ENGINE_ARGS word-split)"),
    "pinned-model-args": Rule("spec", "every ENGINE_ARGS word survives the wrapper's unquoted expansion (no blank "
                              "or glob character; llama.cpp's drops a word with = that is not a flag)",
                              "the llm-init wrappers (set -- $ENGINE_ARGS)"),
    "env-loads-code": Rule("spec", "no env that loads code or changes the interpreter or the loader (LD_PRELOAD, "
                           "PYTHONPATH, PYTHONWARNINGS, BROWSER, PATH, ...): a warning; smoke never passes it",
                           "ld.so(8), glibc unsecvars.h, Python's and vLLM's documented environment "
                           "(core/boot_env.py)"),
    "secret-in-clear": Rule("spec", "no token or secret typed in the spec (token shapes in any field)",
                            f"{OWN}: what a spec holds reaches charts, catalogs and logs"),
    "entrance-title": Rule("spec", "a title used as entrance title has no dots or brackets",
                           "the linter of Olares before 1.12.6 (validateEntranceValue)"),
    "locale-duplicate": Rule("spec", "translations do not repeat the default locale", _SPEC),
    "duplicate-name": Rule("spec", "two specs never render the same chart folder", _SPEC),
    "duplicate-id": Rule("spec", "two apps never share an Olares app id (md5 of the name)",
                         "beclab/market keys apps by id: one of two would vanish"),
    "render": Rule("spec", "description citations parse and cite existing spec fields; no marker survives", _SPEC),
    # engine flags: what vLLM or llama.cpp refuse at boot, or run badly
    "image-floating-tag": Rule("engine", "images are pinned (no latest, no missing tag)",
                               f"{OWN}: an unpinned image runs whatever the registry serves that day"),
    "extra-arg-duplicate": Rule("engine", "extra args do not repeat a typed field",
                                "the engine takes one of the two silently"),
    "engine-release-option": Rule("engine", "every option of the engine container is one the image's release "
                                  "accepts (the release that removed it and its replacement are named)",
                                  "the engine's release tables (engines/<kind>/releases/): it refuses the rest"),
    "engine-release-value": Rule("engine", "enumerated values (spec type, KV-cache dtype, speculative method, "
                                 "parsers, attention backend) are ones the release knows",
                                 "the engine's release tables; a KV-cache dtype only warns: platforms add them"),
    "engine-release-deprecated": Rule("engine", "warning: an option the release deprecates, with the release "
                                      "that removes it", "the engine's release tables"),
    "engine-release-env": Rule("engine", "the engine's own env vars (VLLM_*, LLAMA_ARG_*) are ones the release "
                               "reads", "the engine's release tables: it ignores the rest"),
    "engine-release-table": Rule("engine", "warning: the image's release has no table of its own (the nearest "
                                 "older one is used; past the newest, refresh the tables)",
                                 "the engine's release tables"),
    "image-cuda": Rule("engine", "the image's CUDA is not newer than the driver of the oldest Olares its charts "
                       "install on (a warning when the image's CUDA or that release's driver is not known)",
                       "llama.cpp's docker.yml and vLLM's Dockerfile and -cuNNN tags (engines/*/releases/"
                       "cuda-images.json); Olares' driver pins (data/olares-drivers.yaml); NVIDIA's prestart hook "
                       "(`unsatisfied condition: cuda>=13.3`)"),
    "context-fit": Rule("engine", "the context's KV cache fits the GPU next to the weights (vLLM's arithmetic)",
                        "vLLM refuses to boot (kv_cache_utils check_enough_kv_cache_memory)"),
    "context-window": Rule("engine", "the context stays within the model's positions (warning: past its trained "
                           "window)", "vLLM refuses a max_model_len past max_position_embeddings"),
    "gpu-booking-unused": Rule("engine", "an engine that allocates only what its context needs does not book most of "
                               "the card (the rest stays booked and unused; `plan --write` books the share)",
                               f"{OWN}: Olares refuses the next install (app-service installCapacityFits)"),
    "host-memory": Rule("engine", "the container's memory holds what the engine keeps in host memory (llama.cpp: "
                        "the input embeddings and pinned compute buffers; warning: only the request is below)",
                        "the pod is killed for memory at boot (cgroup OOM)"),
    "model-data": Rule("engine", "the project's models/ files are readable model files (one per repository)",
                       f"{OWN}: fit and the rules read models/ before the shipped data"),
    "drafter-target": Rule("engine", "the drafter is made for the target (its drafter_for list, hidden size and "
                           "vocabulary, else its family)", "a drafter shares the target's tokens and hidden states: "
                           "vLLM refuses a mismatched pair or rejects every draft"),
    "parser-family": Rule("engine", "tool-call and reasoning parsers suit the model's family (data/families.yaml)",
                          "vLLM's parsers read one family's markup: another family's tool calls come back as text"),
    "parser-unknown": Rule("engine", "warning: the parser is one vLLM registers",
                           "vLLM refuses an unknown parser name at boot (unless a plugin adds it)"),
    "calibration-provenance": Rule("engine", "a calibration says what it was measured on (model, image, hardware)",
                                   f"{OWN}: a measurement holds only for the boot it came from"),
    "calibration-stale": Rule("engine", "a calibration was measured on the spec's model, image and hardware",
                              f"{OWN}: another model, engine release or GPU uses other memory"),
    "calibration-log": Rule("engine", "olarespack calibrate reads a boot log of the spec's engine with its "
                            "calibration lines", OWN),
    # Olares' chart rules, mirrored from its own linter
    "olares-files": Rule("olares", "Chart.yaml, values.yaml, templates/ and a parsable OlaresManifest.yaml exist",
                         "oac chartfolder.CheckLayout, validateChartFields, parseManifest"),
    "olares-manifest-template": Rule("olares", "no {{ }} outside YAML strings in a 0.12.0 manifest",
                                     "oac manifest.checkNoTemplateSyntax"),
    "olares-name": Rule("olares", "folder, Chart.yaml name and metadata.name agree and are valid",
                        "oac chartfolder.CheckLayout, CheckConsistency; manifest.validateAppMetaData"),
    "olares-version": Rule("olares", "Chart.yaml version == metadata.version, and it is a semantic version",
                           "oac chartfolder.CheckConsistency; manifest.validateAppMetaData"),
    "olares-api-version": Rule("olares", "olaresManifest.version and apiVersion are set and known; 1.12.6-only "
                               "fields only on 0.12.0 manifests",
                               "oac manifest.ValidateAppConfiguration, validateModernFieldRequiresManifestVersion"),
    "olares-title": Rule("olares", "metadata.title has 1-30 characters", "oac manifest.validateAppMetaData"),
    "olares-description": Rule("olares", "metadata.description is present", "oac manifest.validateAppMetaData"),
    "olares-icon": Rule("olares", "metadata.icon is an http(s) URL", "oac manifest.validateAppMetaData"),
    "olares-categories": Rule("olares", "warning: metadata.categories is present",
                              f"{OWN}: the Market lists apps by category (not enforced by oac)"),
    "olares-taxonomy": Rule("olares", "categories_v2 and tags are slugs; locales are canonical and unique",
                            "oac manifest.ValidateTaxonomy"),
    "olares-entrances": Rule("olares", "1-10 valid, unique entrances with host, port, authLevel, openMethod",
                             "oac manifest.validateEntranceValue, uniqueEntranceNames"),
    "olares-entrance-title": Rule("olares", "entrance titles: 1-30 characters (warning: no dots, for older Olares)",
                                  "oac manifest.validateEntranceValue"),
    "olares-spec": Rule("olares", "the manifest has a spec section", "oac manifest.ValidateAppConfiguration"),
    "olares-support-arch": Rule("olares", "supportArch holds amd64 / arm64, once each", "oac manifest.validateAppSpec"),
    "clone-env": Rule("olares", "a clone of an engine-base app: its envs are the app's, match their pattern and "
                      "options, render, and book GPU memory the card has (its ENGINE_ARGS: engine-release-*)",
                      "the manifest's envs (regex, options); olares-cli market clone checks only the title"),
    "olares-appid": Rule("olares", "warning: metadata.appid is set (market upload drops a chart without one)",
                         "beclab/market uploadevent.DecodeUploadPayload; oac manifest validate (empty appid allowed)"),
    "olares-ports": Rule("olares", "top-level ports: a name, a Service host, a port (and exposePort) in 1-65535, "
                         "protocol tcp or udp, names unique", "oac manifest validate (ServicePort; validate_test.go "
                         "TestServicePortsValidation)"),
    "olares-subpathexpr": Rule("olares", "no volumeMount uses subPathExpr (Olares prepares host folders it cannot "
                               "expand)", "oac resources.CheckSubPathExpr (beclab/Olares PR #3943)"),
    "olares-accelerator": Rule("olares", "resource declarations: a mode oac accepts (cpu, nvidia, nvidia-gb10, "
                               "apple-m, intel, amd, intel-gpu, amd-gpu, moore-soc), the architecture it needs, "
                               "complete per mode, quantities (-1 on a template-only app's fields but its disk), "
                               "limited >= required, GPU memory only on nvidia / amd-gpu / intel-gpu, flat fields "
                               "or accelerator[] but not both",
                               "oac manifest.validateAppSpec, ValidateResourceMode (validResourceModes, "
                               "modeArchRequirement, gpuMemoryModes, resourceQuantityValid), "
                               "specResourceCrossFieldRules at beclab/Olares 3a10c81 (PR #3390)"),
    "gpu-memory-generation": Rule("olares", "warning: below olaresManifest.version 0.12.0 GPU memory sits in the "
                                  "flat spec.requiredGpu, not in accelerator[]",
                                  "app-service parseLegacyAppRequirement reads the flat fields below 0.12.0; oac "
                                  "specResourceCrossFieldRules skips accelerator[] there"),
    "olares-options": Rule("olares", "options: policies, dependencies, templateOnly, shared, overlayGateway",
                           "oac manifest.validateOptions, validateOverlayGateway, validateSharedAppRequirements"),
    "olares-subcharts": Rule("olares", "apiVersion v2 apps list their sub-charts, one of them shared",
                             "oac manifest.checkSubCharts"),
    "olares-permission": Rule("olares", "permissions match what the templates read (appData, appCommon, sharedlib)",
                              "oac checkPermissionTemplateUsage, manifest.validatePermission, validateRootProvider"),
    "olares-dependency": Rule("olares", "the olares system dependency keeps the app on releases that read its "
                              "apiVersion", "oac manifest.validateOlaresDependency"),
    "olares-user-env": Rule("olares", "v3 apps neither name envs OLARES_USER* nor use them in chart files",
                            "oac manifest.validateV3Configuration, checkV3OLARESUserInChart"),
    "olares-workload-replicas": Rule("olares", "0.12.0 manifests declare workloadReplicas, wired to values.yaml; "
                                     "spec.replicas renders as workloads.<name>.replicaCount (0 and 1)",
                                     "oac manifest.validateWorkloadReplicas, checkWorkloadReplicaValues, "
                                     "checkWorkloadScaleToZero (resources.CheckWorkloadReplicasRendered, since "
                                     "beclab/Olares #4040)"),
    "olares-upload": Rule("olares", "options.upload.dest is mounted by a container", "oac resources.CheckUploadConfig"),
    "olares-deployment": Rule("olares", "a Deployment or StatefulSet is named after the app",
                              "oac resources.CheckDeploymentName"),
    "olares-namespace": Rule("olares", "workloads are in the release namespace, other objects there or "
                             "user-system-*", "oac resources.CheckResourceNamespace"),
    "olares-cluster-names": Rule("olares", "a cluster-scoped object's name changes with the release (or, when "
                                 "the app allows one install, with the owner)",
                                 "oac checkAllowMultipleInstall (resources.CheckClusterScopedFixedNames)"),
    "olares-multiple-install": Rule("olares", "an app that allows several installs names a workload after the "
                                    "release", "oac checkAllowMultipleInstall (release-name workload gate)"),
    "olares-overlay-gateway": Rule("olares", "each overlayGateway entrance names a rendered Deployment or "
                                   "StatefulSet",
                                   "oac checkManifestWorkloadRefs (resources.CheckOverlayGatewayWorkloads)"),
    "olares-workload-options": Rule("olares", "workloadOptions, when declared, names every rendered Deployment and "
                                    "StatefulSet and only those, its allow[] targets real containers, and a device "
                                    "capability (device.serial, .video, .audio, .hid) comes with replicas 1 and, "
                                    "on a Deployment, strategy Recreate",
                                    "oac resources.CheckWorkloadOptions (internal/resources/workloads.go)"),
    "olares-hostpath-recreate": Rule("olares", "hostPath volumes come with strategy Recreate (OnDelete for "
                                     "StatefulSets)", "oac resources.CheckHostPath"),
    "olares-container-resources": Rule("olares", "main containers set cpu and memory requests and limits, "
                                       "requests <= limits", "oac checkResourceLimits (resources.CheckResourceLimits)"),
    "olares-resource-sums": Rule("olares", "the main containers' sums fit the manifest's requirement for each mode",
                                 "oac checkResourceLimits (resources.CheckResourceLimits)"),
    "olares-privileged": Rule("olares", "non-beclab images do not run privileged or as root",
                              "oac resources.CheckSecurityContextForNonBeclabImage"),
    "olares-service-account": Rule("olares", "no service account may change nodes or network policies",
                                   "oac resources.CheckServiceAccountRules"),
    "gpumem-bare-mib": Rule("olares", "nvidia.com/gpumem is a bare integer of MiB",
                            "HAMi misreads unit suffixes (the pod gets no GPU memory)"),
    "olares-gpu-limit": Rule("olares", "warning: a chart's limitedGPUMemory above requiredGPUMemory is never given",
                             "app-service webhook addGpuResourceLimits limits the pod to requiredGPUMemory; oac "
                             "accepts it (checkLimitGERequired) and official charts merged it (embeddinggemmav3)"),
    "olares-memory-covers-gpu": Rule("olares", "warning: requiredMemory covers requiredGPUMemory",
                                     "beclab/Olares #3996: app-service charges a time-sliced GPU's app with its "
                                     "requiredMemory alone, which must include the GPU memory (oac lint, per the PR)"),
    "gpu-memory-request": Rule("olares", "an injected container's GPU memory request equals requiredGPUMemory",
                               "app-service webhook addGpuResourceLimits sets the limit; Kubernetes refuses a "
                               "request that differs"),
    "secret-outside-secret": Rule("olares", "warning: the Hugging Face token only travels through a Secret",
                                  f"{OWN}: a token in a ConfigMap or plain value is readable by anyone who can "
                                  "read the app's objects"),
    "chart-input": Rule("olares", "a chart to lint is a folder or archive of bounded size, without symbolic links",
                        f"{OWN}: Helm's own loader limits"),
    # releases
    "version-gate": Rule("release", "a chart whose rendered content changed carries a higher version than at the "
                         "base", "beclab/market never offers a changed chart under the same version"),
    "bump": Rule("release", "a bump only edits a valid spec whose chart has no hand edits", OWN),
    "bench-stale": Rule("release", "warning: cited bench figures were measured with the spec's current speed "
                        "settings", OWN),
    "bench-impossible": Rule("release", "a recorded bench is within what its hardware can decode (memory bandwidth "
                             "over the bytes a token reads, times the tokens a step yields, times 2) and its "
                             "drafting counters are consistent", OWN),
    "plan": Rule("release", "plan --write books the shares in the specs only when every app fits, each in an "
                 "in-place edit of resources.gpu_memory", OWN),
    "published-version": Rule("release", "a published version never changes content",
                              "boxes keep the archive they have for a version"),
    "icon-file": Rule("release", "icons the market serves exist as local regular files", OWN),
    "orphan-chart": Rule("release", "every chart folder is rendered by a spec (no chart left behind by a removed "
                         "spec)", OWN),
    # helm and Kubernetes
    "helm-lint": Rule("helm", "warning: helm lint --strict passes with Helm 3.19 and Helm 4",
                      f"{OWN}: Olares does not run helm lint; helm template below catches what install refuses"),
    "helm-template": Rule("helm", "helm template renders with Olares' values for every accelerator mode",
                          "oac chart.go lintRenderedScenario (helmrender.Render); app-service installs with helm"),
    "kube-schema": Rule("helm", "rendered manifests match the Kubernetes 1.34 schemas (warning: a field they do "
                        "not know)", "the API server refuses objects that do not; an unknown field it drops with a "
                        "warning (field validation Warn, KEP-2885; bytebase merged so, beclab/apps #3328)"),
}


_OWNED: dict[str, tuple[str, Rule]] = {}  # rule id -> (owner, rule): the rules engine packages declare


def register(owner: str, rules: Mapping[str, Rule]) -> None:
    """An engine package's own rules (`owner` names the engine): a rule id means one rule, whoever declares it."""
    for rule_id, rule in rules.items():
        other = "the shared catalog" if rule_id in RULES else _OWNED.get(rule_id, (owner, rule))[0]
        if other != owner:
            raise ValueError(f"rule {rule_id!r} of {owner} is already declared by {other}")
        _OWNED[rule_id] = (owner, rule)


def catalog() -> dict[str, Rule]:
    """Every rule id, layer by layer (in the order the shared catalog gives them), an engine's own after the shared
    ones of its layer."""
    everything = {**RULES, **{rule_id: rule for rule_id, (_, rule) in _OWNED.items()}}
    layers = list(dict.fromkeys(rule.layer for rule in everything.values()))
    return {rule_id: rule for layer in layers for rule_id, rule in everything.items() if rule.layer == layer}


def known(rule_id: str) -> bool:
    return rule_id in RULES or rule_id in _OWNED
