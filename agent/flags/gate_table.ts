/**
 * The feature gates kube-proxy knows, with each gate's spec at the release the agent follows
 * (1.38). Upstream's kube-proxy registers every Kubernetes gate (pkg/features, the apiserver's,
 * component-base's logging, metrics and zpages gates), so a cluster-wide `--feature-gates` list
 * that works for kube-proxy must parse here too; only the gates in {@link PROXY_GATES} change
 * what a proxy does.
 *
 * Sources: component-base/featuregate (AllAlpha, AllBeta), component-base/zpages/features
 * (ComponentFlagz, ComponentStatusz: beta from 1.36), the website's feature-gate pages
 * (AllowServiceExternalIPs: deprecated from 1.36; PreferSameTrafficDistribution: GA from 1.35;
 * KubeProxyNFTablesLocalhostNodePorts: alpha in 1.37, beta and on in 1.38 per KEP-6032), and for
 * the rest upstream's test/compatibility_lifecycle/reference/versioned_feature_list.yaml as of
 * 1.34 (each gate's last spec; gates added after 1.34 that no proxy reads are missing).
 *
 * @module
 */

/** A gate's maturity, as component-base names it. */
export type Stage = "Alpha" | "Beta" | "GA" | "Deprecated";

/** One gate's spec at the version followed. */
export interface GateSpec {
  /** Maturity. */
  stage: Stage;
  /** Value when not set. */
  default: boolean;
  /** Setting the other value is an error. */
  locked: boolean;
}

const STAGES: Record<string, Stage> = { A: "Alpha", B: "Beta", GA: "GA", D: "Deprecated" };

/**
 * The gates a proxy reads (upstream's pkg/proxy and cmd/kube-proxy, 1.33-1.38) and
 * component-base's, as "Name stage default [L]" (L: locked). What each does here is in
 * docs/flags.md.
 */
const PROXY = [
  "AllAlpha A f",
  "AllBeta B f",
  "AllowServiceExternalIPs D t",
  "KubeProxyNFTablesLocalhostNodePorts B t",
  "ComponentFlagz B t",
  "ComponentStatusz B t",
  "ComponentSLIs GA t L",
  "ContextualLogging B t",
  "LoggingAlphaOptions A f",
  "LoggingBetaOptions B t",
  "MultiCIDRServiceAllocator GA t L",
  "NFTablesProxyMode GA t L",
  "PreferSameTrafficDistribution GA t L",
  "ServiceTrafficDistribution GA t L",
  "TopologyAwareHints GA t L",
  "LoadBalancerIPMode GA t L",
  "WinDSR B t",
  "WinOverlay B t",
];

/** Every other Kubernetes gate (1.34's list), accepted with no effect on a proxy. */
const OTHER = [
  "AggregatedDiscoveryRemoveBetaType D t",
  "AllowDNSOnlyNodeCSR D f",
  "AllowInsecureKubeletCertificateSigningRequests D f",
  "AllowOverwriteTerminationGracePeriodSeconds D f",
  "AllowParsingUserUIDFromCertAuth B t",
  "AllowServiceLBStatusOnNonLB D f L",
  "AllowUnsafeMalformedObjectDeletion A f",
  "AnonymousAuthConfigurableEndpoints GA t L",
  "AnyVolumeDataSource GA t L",
  "APIResponseCompression B t",
  "APIServerIdentity B t",
  "APIServerTracing B t",
  "APIServingWithRoutine A f",
  "AuthorizeNodeWithSelectors GA t L",
  "AuthorizeWithSelectors GA t L",
  "BtreeWatchCache GA t L",
  "CBORServingAndStorage A f",
  "ClearingNominatedNodeNameAfterBinding B t",
  "CloudControllerManagerWebhook A f",
  "ClusterTrustBundle B f",
  "ClusterTrustBundleProjection B f",
  "ConcurrentWatchObjectDecode B f",
  "ConsistentListFromCache GA t L",
  "ContainerCheckpoint B t",
  "ContainerStopSignals A f",
  "CoordinatedLeaderElection B f",
  "CPUCFSQuotaPeriod A f",
  "CPUManagerPolicyAlphaOptions A f",
  "CPUManagerPolicyBetaOptions B t",
  "CPUManagerPolicyOptions GA t L",
  "CRDValidationRatcheting GA t L",
  "CronJobsScheduledAnnotation GA t L",
  "CrossNamespaceVolumeDataSource A f",
  "CSIMigrationPortworx GA t L",
  "CSIVolumeHealth A f",
  "CustomResourceFieldSelectors GA t L",
  "DeclarativeValidation B t",
  "DeclarativeValidationTakeover B f",
  "DeploymentReplicaSetTerminatingReplicas A f",
  "DetectCacheInconsistency B t",
  "DevicePluginCDIDevices GA t L",
  "DisableAllocatorDualWrite GA t",
  "DisableCPUQuotaWithExclusiveCPUs B t",
  "DisableNodeKubeProxyVersion D t",
  "DRAAdminAccess A f",
  "DRADeviceTaints A f",
  "DRAPartitionableDevices A f",
  "DRAPrioritizedList A f",
  "DRAResourceClaimDeviceStatus B t",
  "DRASchedulerFilterTimeout B t",
  "DynamicResourceAllocation B f",
  "EventedPLEG A f",
  "ExecProbeTimeout GA t",
  "ExternalServiceAccountTokenSigner B t",
  "GitRepoVolumeDriver D f",
  "GracefulNodeShutdown B t",
  "GracefulNodeShutdownBasedOnPodPriority B t",
  "HonorPVReclaimPolicy GA t L",
  "HPAConfigurableTolerance A f",
  "HPAScaleToZero A f",
  "ImageMaximumGCAge B t",
  "ImageVolume B f",
  "InPlacePodVerticalScaling B t",
  "InPlacePodVerticalScalingAllocatedStatus D f",
  "InPlacePodVerticalScalingExclusiveCPUs A f",
  "InTreePluginPortworxUnregister A f",
  "JobBackoffLimitPerIndex GA t L",
  "JobManagedBy B t",
  "JobPodReplacementPolicy GA t L",
  "JobSuccessPolicy GA t L",
  "KMSv1 D f",
  "KubeletCgroupDriverFromCRI B t",
  "KubeletCrashLoopBackOffMax A f",
  "KubeletEnsureSecretPulledImages A f",
  "KubeletFineGrainedAuthz B t",
  "KubeletInUserNamespace A f",
  "KubeletPodResourcesDynamicResources A f",
  "KubeletPodResourcesGet A f",
  "KubeletPodResourcesListUseActivePods D t",
  "KubeletPSI A f",
  "KubeletRegistrationGetOnExistsOnly D f",
  "KubeletSeparateDiskGC B t",
  "KubeletServiceAccountTokenForCredentialProviders A f",
  "KubeletTracing GA t L",
  "LegacySidecarContainers D f",
  "ListFromCacheSnapshot B t",
  "LocalStorageCapacityIsolationFSQuotaMonitoring B f",
  "LogarithmicScaleDown GA t L",
  "MatchLabelKeysInPodAffinity GA t L",
  "MatchLabelKeysInPodTopologySpread B t",
  "MatchLabelKeysInPodTopologySpreadSelectorMerge B t",
  "MaxUnavailableStatefulSet A f",
  "MemoryManager GA t L",
  "MemoryQoS A f",
  "MutableCSINodeAllocatableCount A f",
  "MutatingAdmissionPolicy B f",
  "NodeInclusionPolicyInPodTopologySpread GA t L",
  "NodeLogQuery B f",
  "NodeSwap GA t L",
  "NominatedNodeNameForExpectation B t",
  "OpenAPIEnums B t",
  "OrderedNamespaceDeletion GA t L",
  "PodAndContainerStatsFromCRI A f",
  "PodDeletionCost B t",
  "PodIndexLabel GA t L",
  "PodLevelResources A f",
  "PodLifecycleSleepAction B t",
  "PodLifecycleSleepActionAllowZero B t",
  "PodLogsQuerySplitStreams A f",
  "PodObservedGenerationTracking A f",
  "PodReadyToStartContainersCondition B t",
  "PodSchedulingReadiness GA t L",
  "PodTopologyLabelsAdmission A f",
  "PortForwardWebsockets B t",
  "PreventStaticPodAPIReferences B t",
  "ProcMountType B t",
  "QOSReserved A f",
  "RecoverVolumeExpansionFailure GA t L",
  "RecursiveReadOnlyMounts GA t L",
  "ReduceDefaultCrashLoopBackOffDecay A f",
  "RelaxedDNSSearchValidation GA t L",
  "RelaxedEnvironmentVariableValidation GA t L",
  "RelaxedServiceNameValidation A f",
  "ReloadKubeletServerCertificateFile B t",
  "RemoteRequestHeaderUID B t",
  "ResilientWatchCacheInitialization GA t L",
  "ResourceHealthStatus A f",
  "RetryGenerateName GA t L",
  "RotateKubeletServerCertificate B t",
  "RuntimeClassInImageCriAPI A f",
  "SchedulerAsyncAPICalls B t",
  "SchedulerAsyncPreemption B t",
  "SchedulerPopFromBackoffQ B t",
  "SchedulerQueueingHints GA t L",
  "SELinuxChangePolicy B t",
  "SELinuxMount B f",
  "SELinuxMountReadWriteOncePod B t",
  "SeparateCacheWatchRPC D f",
  "SeparateTaintEvictionController GA t L",
  "ServiceAccountNodeAudienceRestriction B t",
  "ServiceAccountTokenJTI GA t L",
  "ServiceAccountTokenNodeBinding GA t L",
  "ServiceAccountTokenNodeBindingValidation GA t L",
  "ServiceAccountTokenPodNodeInfo GA t L",
  "SidecarContainers GA t L",
  "SizeBasedListCostEstimate B t",
  "SizeMemoryBackedVolumes GA t L",
  "StatefulSetAutoDeletePVC GA t L",
  "StorageCapacityScoring A f",
  "StorageNamespaceIndex D t",
  "StorageVersionAPI A f",
  "StorageVersionHash B t",
  "StorageVersionMigrator A f",
  "StreamingCollectionEncodingToJSON GA t L",
  "StreamingCollectionEncodingToProtobuf GA t L",
  "StrictCostEnforcementForVAP GA t L",
  "StrictCostEnforcementForWebhooks GA t L",
  "StrictIPCIDRValidation A f",
  "StructuredAuthenticationConfiguration GA t L",
  "StructuredAuthenticationConfigurationEgressSelector B t",
  "StructuredAuthorizationConfiguration GA t L",
  "SupplementalGroupsPolicy B t",
  "SystemdWatchdog B t",
  "TokenRequestServiceAccountUIDValidation B t",
  "TopologyManagerPolicyAlphaOptions A f",
  "TopologyManagerPolicyBetaOptions B t",
  "TopologyManagerPolicyOptions GA t",
  "TranslateStreamCloseWebsocketRequests B t",
  "UnauthenticatedHTTP2DOSMitigation B t",
  "UnknownVersionInteroperabilityProxy A f",
  "UserNamespacesPodSecurityStandards A f",
  "UserNamespacesSupport B t",
  "VolumeAttributesClass B f",
  "WatchCacheInitializationPostStartHook B f",
  "WatchFromStorageWithoutResourceVersion D f L",
  "WatchList B f",
  "WindowsCPUAndMemoryAffinity A f",
  "WindowsGracefulNodeShutdown A f",
  "WindowsHostNetwork D f",
];

function table(lines: readonly string[]): Map<string, GateSpec> {
  return new Map(lines.map((line) => {
    const [name, stage, def, lock] = line.split(" ");
    return [name, { stage: STAGES[stage], default: def === "t", locked: lock === "L" }];
  }));
}

/** The gates a proxy or its components read, by name. */
export const PROXY_GATES: ReadonlyMap<string, GateSpec> = table(PROXY);

/** Every gate kube-proxy accepts, by name. */
export const KNOWN_GATES: ReadonlyMap<string, GateSpec> = new Map([
  ...PROXY_GATES,
  ...table(OTHER),
]);
