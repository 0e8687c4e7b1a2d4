"""The Olares layer of the rule catalog (core/rule_catalog.py): the chart rules mirrored from Olares' own linter
(beclab/Olares framework/oac, each naming its function) and the chart-level ones olarespack adds."""

from __future__ import annotations

from olarespack.core.rule import OWN, Rule

OLARES_RULES: dict[str, Rule] = {
    # Olares' chart rules, mirrored from its own linter
    "olares-files": Rule(
        "olares",
        "Chart.yaml, values.yaml, templates/ and a parsable OlaresManifest.yaml exist",
        "oac chartfolder.CheckLayout, validateChartFields, parseManifest",
    ),
    "olares-manifest-template": Rule(
        "olares", "no {{ }} outside YAML strings in a 0.12.0 manifest", "oac manifest.checkNoTemplateSyntax"
    ),
    "olares-name": Rule(
        "olares",
        "folder, Chart.yaml name and metadata.name agree and are valid",
        "oac chartfolder.CheckLayout, CheckConsistency; manifest.validateAppMetaData",
    ),
    "olares-version": Rule(
        "olares",
        "Chart.yaml version == metadata.version, and it is a semantic version",
        "oac chartfolder.CheckConsistency; manifest.validateAppMetaData",
    ),
    "olares-api-version": Rule(
        "olares",
        "olaresManifest.version and apiVersion are set and known; 1.12.6-only fields only on 0.12.0 manifests",
        "oac manifest.ValidateAppConfiguration, validateModernFieldRequiresManifestVersion",
    ),
    "olares-title": Rule("olares", "metadata.title has 1-30 characters", "oac manifest.validateAppMetaData"),
    "olares-description": Rule("olares", "metadata.description is present", "oac manifest.validateAppMetaData"),
    "olares-icon": Rule("olares", "metadata.icon is an http(s) URL", "oac manifest.validateAppMetaData"),
    "olares-categories": Rule(
        "olares",
        "warning: metadata.categories is present",
        f"{OWN}: the Market lists apps by category (not enforced by oac)",
    ),
    "olares-taxonomy": Rule(
        "olares", "categories_v2 and tags are slugs; locales are canonical and unique", "oac manifest.ValidateTaxonomy"
    ),
    "olares-entrances": Rule(
        "olares",
        "1-10 valid, unique entrances with host, port, authLevel, openMethod",
        "oac manifest.validateEntranceValue, uniqueEntranceNames",
    ),
    "olares-entrance-title": Rule(
        "olares",
        "entrance titles: 1-30 characters (warning: no dots, for older Olares)",
        "oac manifest.validateEntranceValue",
    ),
    "olares-spec": Rule("olares", "the manifest has a spec section", "oac manifest.ValidateAppConfiguration"),
    "olares-support-arch": Rule("olares", "supportArch holds amd64 / arm64, once each", "oac manifest.validateAppSpec"),
    "clone-env": Rule(
        "olares",
        "a clone of an engine-base app: its envs are the app's, match their pattern and "
        "options, render, and book GPU memory the card has (its ENGINE_ARGS: engine-release-*)",
        "the manifest's envs (regex, options); olares-cli market clone checks only the title",
    ),
    "olares-appid": Rule(
        "olares",
        "warning: metadata.appid is set (market upload drops a chart without one)",
        "beclab/market uploadevent.DecodeUploadPayload; oac manifest validate (empty appid allowed)",
    ),
    "olares-ports": Rule(
        "olares",
        "top-level ports: a name, a Service host, a port (and exposePort) in 1-65535, "
        "protocol tcp or udp, names unique",
        "oac manifest validate (ServicePort; validate_test.go TestServicePortsValidation)",
    ),
    "olares-subpathexpr": Rule(
        "olares",
        "no volumeMount uses subPathExpr (Olares prepares host folders it cannot expand)",
        "oac resources.CheckSubPathExpr (beclab/Olares PR #3943)",
    ),
    "olares-accelerator": Rule(
        "olares",
        "resource declarations: a mode oac accepts (cpu, nvidia, nvidia-gb10, "
        "apple-m, intel, amd, intel-gpu, amd-gpu, moore-soc), the architecture it needs, "
        "complete per mode, quantities (-1 on a template-only app's fields but its disk), "
        "limited >= required, GPU memory only on nvidia / amd-gpu / intel-gpu, flat fields "
        "or accelerator[] but not both",
        "oac manifest.validateAppSpec, ValidateResourceMode (validResourceModes, "
        "modeArchRequirement, gpuMemoryModes, resourceQuantityValid), "
        "specResourceCrossFieldRules at beclab/Olares 3a10c81 (PR #3390)",
    ),
    "gpu-memory-generation": Rule(
        "olares",
        "warning: below olaresManifest.version 0.12.0 GPU memory sits in the "
        "flat spec.requiredGpu, not in accelerator[]",
        "app-service parseLegacyAppRequirement reads the flat fields below 0.12.0; oac "
        "specResourceCrossFieldRules skips accelerator[] there",
    ),
    "olares-options": Rule(
        "olares",
        "options: policies, dependencies, templateOnly, shared, overlayGateway",
        "oac manifest.validateOptions, validateOverlayGateway, validateSharedAppRequirements",
    ),
    "olares-subcharts": Rule(
        "olares", "apiVersion v2 apps list their sub-charts, one of them shared", "oac manifest.checkSubCharts"
    ),
    "olares-permission": Rule(
        "olares",
        "permissions match what the templates read (appData, appCommon, sharedlib)",
        "oac checkPermissionTemplateUsage, manifest.validatePermission, validateRootProvider",
    ),
    "olares-dependency": Rule(
        "olares",
        "the olares system dependency keeps the app on releases that read its apiVersion",
        "oac manifest.validateOlaresDependency",
    ),
    "olares-user-env": Rule(
        "olares",
        "v3 apps neither name envs OLARES_USER* nor use them in chart files",
        "oac manifest.validateV3Configuration, checkV3OLARESUserInChart",
    ),
    "olares-workload-replicas": Rule(
        "olares",
        "0.12.0 manifests declare workloadReplicas, wired to values.yaml; "
        "spec.replicas renders as workloads.<name>.replicaCount (0 and 1)",
        "oac manifest.validateWorkloadReplicas, checkWorkloadReplicaValues, "
        "checkWorkloadScaleToZero (resources.CheckWorkloadReplicasRendered, since "
        "beclab/Olares #4040)",
    ),
    "olares-upload": Rule("olares", "options.upload.dest is mounted by a container", "oac resources.CheckUploadConfig"),
    "olares-deployment": Rule(
        "olares", "a Deployment or StatefulSet is named after the app", "oac resources.CheckDeploymentName"
    ),
    "olares-namespace": Rule(
        "olares",
        "workloads are in the release namespace, other objects there or user-system-*",
        "oac resources.CheckResourceNamespace",
    ),
    "olares-cluster-names": Rule(
        "olares",
        "a cluster-scoped object's name changes with the release (or, when the app allows one install, with the owner)",
        "oac checkAllowMultipleInstall (resources.CheckClusterScopedFixedNames)",
    ),
    "olares-multiple-install": Rule(
        "olares",
        "an app that allows several installs names a workload after the release",
        "oac checkAllowMultipleInstall (release-name workload gate)",
    ),
    "olares-overlay-gateway": Rule(
        "olares",
        "each overlayGateway entrance names a rendered Deployment or StatefulSet",
        "oac checkManifestWorkloadRefs (resources.CheckOverlayGatewayWorkloads)",
    ),
    "olares-workload-options": Rule(
        "olares",
        "workloadOptions, when declared, names every rendered Deployment and "
        "StatefulSet and only those, its allow[] targets real containers, and a device "
        "capability (device.serial, .video, .audio, .hid) comes with replicas 1 and, "
        "on a Deployment, strategy Recreate",
        "oac resources.CheckWorkloadOptions (internal/resources/workloads.go)",
    ),
    "olares-hostpath-recreate": Rule(
        "olares",
        "hostPath volumes come with strategy Recreate (OnDelete for StatefulSets)",
        "oac resources.CheckHostPath",
    ),
    "olares-container-resources": Rule(
        "olares",
        "main containers set cpu and memory requests and limits, requests <= limits",
        "oac checkResourceLimits (resources.CheckResourceLimits)",
    ),
    "olares-resource-sums": Rule(
        "olares",
        "the main containers' sums fit the manifest's requirement for each mode",
        "oac checkResourceLimits (resources.CheckResourceLimits)",
    ),
    "olares-privileged": Rule(
        "olares",
        "non-beclab images do not run privileged or as root",
        "oac resources.CheckSecurityContextForNonBeclabImage",
    ),
    "olares-service-account": Rule(
        "olares", "no service account may change nodes or network policies", "oac resources.CheckServiceAccountRules"
    ),
    "gpumem-bare-mib": Rule(
        "olares",
        "nvidia.com/gpumem is a bare integer of MiB",
        "HAMi misreads unit suffixes (the pod gets no GPU memory)",
    ),
    "olares-gpu-limit": Rule(
        "olares",
        "warning: a chart's limitedGPUMemory above requiredGPUMemory is never given",
        "app-service webhook addGpuResourceLimits limits the pod to requiredGPUMemory; oac "
        "accepts it (checkLimitGERequired) and official charts merged it (embeddinggemmav3)",
    ),
    "olares-memory-covers-gpu": Rule(
        "olares",
        "warning: requiredMemory covers requiredGPUMemory",
        "beclab/Olares #3996: app-service charges a time-sliced GPU's app with its "
        "requiredMemory alone, which must include the GPU memory (oac lint, per the PR)",
    ),
    "gpu-memory-request": Rule(
        "olares",
        "an injected container's GPU memory request equals requiredGPUMemory",
        "app-service webhook addGpuResourceLimits sets the limit; Kubernetes refuses a request that differs",
    ),
    "secret-outside-secret": Rule(
        "olares",
        "warning: the Hugging Face token only travels through a Secret",
        f"{OWN}: a token in a ConfigMap or plain value is readable by anyone who can read the app's objects",
    ),
    "chart-input": Rule(
        "olares",
        "a chart to lint is a folder or archive of bounded size, without symbolic links",
        f"{OWN}: Helm's own loader limits",
    ),
    # releases
    "version-gate": Rule(
        "release",
        "a chart whose rendered content changed carries a higher version than at the base",
        "beclab/market never offers a changed chart under the same version",
    ),
    "bump": Rule("release", "a bump only edits a valid spec whose chart has no hand edits", OWN),
    "bench-stale": Rule(
        "release", "warning: cited bench figures were measured with the spec's current speed settings", OWN
    ),
    "bench-impossible": Rule(
        "release",
        "a recorded bench is within what its hardware can decode (memory bandwidth "
        "over the bytes a token reads, times the tokens a step yields, times 2) and its "
        "drafting counters are consistent",
        OWN,
    ),
    "plan": Rule(
        "release",
        "plan --write books the shares in the specs only when every app fits, each in an "
        "in-place edit of resources.gpu_memory",
        OWN,
    ),
    "published-version": Rule(
        "release", "a published version never changes content", "boxes keep the archive they have for a version"
    ),
    "icon-file": Rule("release", "icons the market serves exist as local regular files", OWN),
    "orphan-chart": Rule(
        "release", "every chart folder is rendered by a spec (no chart left behind by a removed spec)", OWN
    ),
    # helm and Kubernetes
    "helm-lint": Rule(
        "helm",
        "warning: helm lint --strict passes with Helm 3.19 and Helm 4",
        f"{OWN}: Olares does not run helm lint; helm template below catches what install refuses",
    ),
    "helm-template": Rule(
        "helm",
        "helm template renders with Olares' values for every accelerator mode",
        "oac chart.go lintRenderedScenario (helmrender.Render); app-service installs with helm",
    ),
    "kube-schema": Rule(
        "helm",
        "rendered manifests match the Kubernetes 1.34 schemas (warning: a field they do not know)",
        "the API server refuses objects that do not; an unknown field it drops with a "
        "warning (field validation Warn, KEP-2885; bytebase merged so, beclab/apps #3328)",
    ),
}
